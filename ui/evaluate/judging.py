"""The Evaluate page's Judge control: the judge samples' temperature, how many topics are not judged yet, and a
job of ``eval.judge`` units that runs in the app's workers (closing the page does not stop it)."""

from __future__ import annotations

import logging

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from backends.config import ConfigError
from evaluation.faireval import judgment_key
from evaluation.service import RunPair
from palset.dataset import Dataset
from sim.store import SimStore
from ui import platform_state
from ui.jobs import active_job, failure_text, follow, submit, watch
from ui.platform_state import base_workspace
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)


def judge_temperature(column: DeltaGenerator) -> float | None:
    """The judge samples' temperature for this judging (None: the judge role's, Mem-PAL's 0 by default)."""
    try:
        default = platform_state.platform_config().role("judge").temperature
    except ConfigError:
        log.warning("judge role misconfigured; its temperature is unknown", exc_info=True)
        default = 0.0
    value = float(column.number_input("Sampling temperature", 0.0, 2.0, float(default), step=0.5, key="eval_temp",
                                      help="Of the judge samples. Mem-PAL's code judges at 0 (the judge role's default); "
                                           "FairEval samples its k evidences at 1, which human-in-the-loop "
                                           "calibration needs (at 0 the samples of an order agree, so BPDE is only "
                                           "0 or 1). A new temperature makes new judgments; stored ones are kept."))
    return None if value == default else value


def render_judge_button(dataset: Dataset, sims: SimStore, pairs: list[RunPair], aspects: list[str], k: int,
                        threshold: float, temperature: float | None = None, key: str = "eval_judge") -> None:
    if not pairs:
        st.caption("No topic has finished runs of both methods: nothing to judge.")
        return
    try:
        llm = platform_state.llm_client()
        from backends.prompts import load_prompt

        model = llm.config.role("judge").model
        versions = {a: load_prompt(f"eval/faireval_{a}").version for a in aspects}
    except Exception as e:  # configuration problems are a message
        log.exception("judging cannot start")
        st.error(f"Cannot judge: {md_escape(error_text(e))}")
        return
    store = base_workspace().evals
    todo = [p for p in pairs if any(not store.has_judgment(judgment_key(p.run_a, p.run_b, a, k, model, versions[a],
                                                                        temperature)) for a in aspects)]
    at = "" if temperature is None else f" at temperature {temperature:g}"
    st.caption(f"{len(pairs)} paired topic(s); {len(todo)} not judged yet with k={k} by {md_escape(model)}{at}.")
    if (running := active_job("judge-", kind="judge")) is not None:  # judging goes on with the page closed
        watch(running.job_id, "Judging")
        return
    if not st.button("Judge" + at, key=key, type="primary", icon=":material/balance:", disabled=not todo):
        return
    try:
        job_id = submit_judging(dataset, sims, todo, aspects, k, threshold, temperature)
    except Exception as e:  # configuration or store problems: a message, never a traceback
        log.exception("judging cannot start")
        st.error(f"Cannot judge: {md_escape(error_text(e))}")
        return
    summary = follow(job_id, f"Judging {len(todo)} topic(s)")
    if summary.status != "done":
        st.error(f"Judging stopped: {md_escape(failure_text(summary))}. Every finished judgment is stored; press "
                 "Judge again to continue.")
        return
    st.success(f"Judged {len(todo)} topic(s).")


def submit_judging(dataset: Dataset, sims: SimStore, pairs: list[RunPair], aspects: list[str], k: int,
                   threshold: float, temperature: float | None = None) -> str:
    """A job of ``eval.judge`` units, one judgment after the other (a failure stops the rest, which a second
    press continues); it runs in the app's workers, so closing the page does not stop it."""
    from protocol.units import judge_units

    specs = [(sims.load(p.run_a).spec, sims.load(p.run_b).spec) for p in pairs]
    units = judge_units(dataset, specs, aspects, k, threshold, temperature=temperature)
    units = [u.model_copy(update={"deps": [units[i - 1].key] if i else []}) for i, u in enumerate(units)]
    return submit("judge", f"judge {specs[0][0].method} vs {specs[0][1].method}", units)
