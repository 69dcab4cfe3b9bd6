"""The step inspector of the Generate page: each step's output, the prompt name@version that produced
it, its retries and repairs; a JSON editor validated against the step's schema and rules (errors name
the field); and "Re-run from here", which regenerates the step and exactly the steps downstream of it."""

from __future__ import annotations

import json

import streamlit as st

from synth.pipeline import Pipeline
from synth.registry import STEPS, downstream
from ui import platform_state
from ui.generate import jobs as generate_jobs
from ui.text import md_escape


def render_steps(pipeline: Pipeline, running: bool) -> None:
    st.subheader("Steps")
    report = pipeline.report()
    for step in STEPS:
        rec = pipeline.record(step.name)
        mark = ":green[✓]" if rec else ":gray[○]"
        with st.expander(f"{mark} {step.title} ({step.spec})", expanded=False):
            st.caption(f"step `{step.name}` · depends on: {', '.join(step.deps) or 'nothing'} · "
                       f"prompt: {step.prompt or 'none (no LLM call)'}")
            if rec is None:
                st.caption("Not run yet.")
                continue
            prompts = ", ".join(rec.prompts) or "none"
            st.caption(f"Produced by {prompts} · {rec.calls} call(s) · {rec.retries} validation retries · "
                       f"{rec.seconds:.1f}s" + (" · edited by a person" if rec.edited else ""))
            if rec.fixes:
                st.caption("Repaired: " + ", ".join(f"{k}: {v}" for k, v in rec.fixes.items()))
            if rec.errors:
                with st.popover(f"{len(rec.errors)} rejected answer(s)"):
                    for e in rec.errors[:30]:
                        st.code(e, language=None)
            if rec.reasoning:
                with st.popover(f"Reasoning of {len(rec.reasoning)} call(s) (kept apart from the output)"):
                    for thought in rec.reasoning[:30]:
                        st.code(thought, language=None, wrap_lines=True)
            st.json(rec.output, expanded=False)
            if not running:
                _editor(pipeline, step.name, rec)
    if pipeline.record("logs") is not None:
        st.subheader("Quality report")
        for line in report.lines():
            st.markdown(f"- {md_escape(line)}")


def _editor(pipeline: Pipeline, name: str, rec) -> None:
    key = f"gen_edit_{pipeline.run_id}_{name}"
    st.text_area("Edit the output (JSON)", value=json.dumps(rec.output, ensure_ascii=False, indent=1), key=key,
                 height=200)
    c1, c2 = st.columns(2)
    affected = downstream(name)
    if c1.button("Validate and save", key=f"{key}_save",
                 help=f"Drops the steps downstream: {', '.join(affected) or 'none'}"):
        problems = pipeline.edit(name, st.session_state[key])
        if problems:
            for p in problems:
                st.error(p)
        else:
            st.session_state.pop(key, None)
            st.success(f"Saved. Downstream steps to regenerate: {', '.join(affected) or 'none'}. Press Resume.")
    if c2.button("Re-run from here", key=f"{key}_rerun", help="Regenerates this step and everything downstream"):
        st.session_state.pop(key, None)
        generate_jobs.start(pipeline.run_id, platform_state.llm_client(), pipeline.store, rerun_from=name)
        st.rerun()
