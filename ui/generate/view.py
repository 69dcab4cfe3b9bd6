"""Rendering of the Generate page: grow a synthetic user with the PAL-Set pipeline (Mem-PAL §2).

Setup: describe the user or pick a seed profile (the active dataset's users), choose months, language,
random seed and the dataset folder to add the user to, then start. The run goes on as a job of the app's
engine (:mod:`ui.generate.jobs`), whose unit stores each step as it finishes; the page shows live progress in
``st.status``, the cost so far, a Cancel button, and every step's output (see
:mod:`ui.generate.steps`). ``?run=<run_id>`` opens a run; on success a link opens the new user in the
Users page.
"""

from __future__ import annotations

import logging
from pathlib import Path

import streamlit as st
from pydantic import ValidationError

from backends.config import ConfigError
from backends.roots import OutsideRoots, inside_roots
from palset.dataset import Dataset
from synth.config import SynthConfig
from synth.pipeline import Pipeline, field_errors, new_run_id
from synth.registry import NAMES, get_step
from synth.store import SynthStore
from ui import platform_state
from ui.datasets import name_for_path
from ui.generate import jobs as generate_jobs
from ui.generate.eta import eta_text, seconds_left
from ui.generate.steps import render_steps
from ui.platform_state import base_workspace
from ui.text import md_escape

log = logging.getLogger(__name__)

DESCRIBE, SEED = "Describe a user", "Pick a seed profile"
STATUS_STATE = {"finished": "complete", "failed": "error", "cancelled": "error"}


def render_generate(dataset: Dataset) -> None:
    st.title("Generate")
    run_id = st.query_params.get("run")
    store = base_workspace().synth
    if run_id and store.exists(run_id):
        if st.button("New user", key="gen_new", icon=":material/add:"):
            st.query_params.pop("run", None)
            st.rerun()
        render_run(run_id, store)
        return
    if run_id:
        st.warning(f"No generation run {md_escape(repr(run_id))}; start a new one.")
    render_setup(dataset, store)


# ---------------------------------------------------------------- setup


def render_setup(dataset: Dataset, store: SynthStore) -> None:
    st.caption("Each step of the PAL-Set pipeline runs with the synthesizer role and is stored as it finishes: "
               "inspect, edit and re-run any step.")
    mode = st.radio("Start from", [DESCRIBE, SEED], horizontal=True, key="gen_mode")
    description, seed_profile = None, None
    if mode == DESCRIBE:
        description = st.text_area("Who is the user?", key="gen_describe", max_chars=2000,
                                   placeholder="a 41-year-old night-shift nurse in Leeds, recently divorced…") or None
    else:
        seeds = {u.uid: u for u in dataset.users.values() if u.profile is not None}
        if not seeds:
            st.info("The active dataset has no profiles to use as seeds; describe a user instead.")
            return
        uid = st.selectbox("Seed profile (format example)", list(seeds), key="gen_seed_user",
                           format_func=lambda u: f"{u} · {seeds[u].profile.name}")
        seed_profile = seeds[uid].profile.model_dump(by_alias=True, exclude_none=True)
    c1, c2, c3 = st.columns(3)
    months = c1.number_input("Months (ending 2024-12)", 1, 12, 7, key="gen_months",
                             help="The spec uses 7–12; 1 month makes a small user quickly.")
    lang = c2.selectbox("Language", ["en", "zh"], index=0 if dataset.language != "zh" else 1, key="gen_lang")
    seed = c3.number_input("Random seed", 0, 2**31 - 1, 0, key="gen_seed")
    out = st.text_input("Dataset folder (new or existing release)", key="gen_out",
                        value=str(base_workspace().home / "generated"))
    if st.button("Start", type="primary", key="gen_start", icon=":material/play_arrow:"):
        try:
            config = SynthConfig(lang=lang, months=int(months), seed=int(seed), seed_profile=seed_profile,
                                 description=description)
        except ValidationError as e:
            for line in field_errors(e):
                st.error(line)
            return
        if not out.strip():
            st.error("Choose a dataset folder.")
            return
        try:
            target = inside_roots(out)
        except OutsideRoots as e:
            st.error(md_escape(e))
            return
        run_id = new_run_id()
        store.create(run_id, config, str(target))
        generate_jobs.start(run_id, platform_state.llm_client(), store)
        st.query_params["run"] = run_id
        st.rerun()
    render_recent(store)


def render_recent(store: SynthStore) -> None:
    runs = store.list()[:20]
    if not runs:
        return
    st.subheader("Recent runs")
    for r in runs:
        label = f"{r.run_id} · {r.status} · {r.config.lang} · {r.config.months} month(s)" + (f" · user {r.uid}" if r.uid else "")
        st.page_link("pages/generate.py", label=md_escape(label), query_params={"run": r.run_id})


# ---------------------------------------------------------------- one run


def render_run(run_id: str, store: SynthStore) -> None:
    info = store.load(run_id)
    alive = generate_jobs.running(run_id)
    st.subheader(f"Run {md_escape(run_id)}")
    st.caption(f"{info.config.lang} · {info.config.months} month(s) · seed {info.config.seed} · into "
               f"{md_escape(info.out)}")
    buttons = st.columns(4)
    if alive:
        if buttons[0].button("Cancel", key="gen_cancel", icon=":material/stop:"):
            generate_jobs.cancel(run_id)
            generate_jobs.wait(run_id, 30)  # the unit stops at its next call
            st.rerun()
    elif info.status != "finished":
        if buttons[0].button("Resume", key="gen_resume", type="primary", icon=":material/play_arrow:"):
            generate_jobs.start(run_id, platform_state.llm_client(), store)
            st.rerun()
    render_progress(run_id, store)
    pipeline = Pipeline(run_id, store, calls=base_workspace().runs)
    render_steps(pipeline, running=generate_jobs.running(run_id))


@st.fragment(run_every=2)
def render_progress(run_id: str, store: SynthStore) -> None:
    """Live status of the run (refreshes itself while the engine's worker runs it)."""
    info = store.load(run_id)
    pipeline = Pipeline(run_id, store, calls=base_workspace().runs)
    job = generate_jobs.get(run_id)
    alive = generate_jobs.running(run_id)
    done = len(NAMES) - len(pipeline.pending())
    left = eta_text(seconds_left(pipeline.records())) if alive else ""
    if alive and job is not None:
        now = get_step(job.current).title if job.current else "…"
        label = f"Generating: {now} ({done}/{len(NAMES)} steps{f', {left}' if left else ''})"
        state = "running"
    else:
        label = f"{info.status.capitalize()}: {done}/{len(NAMES)} steps"
        state = STATUS_STATE.get(info.status, "running" if done < len(NAMES) else "complete")
        if state == "running":
            state = "error" if info.status != "new" else "complete"
    with st.status(label, state=state, expanded=alive):  # type: ignore[arg-type]  # state is one of st.status's states
        for name in NAMES:
            rec = pipeline.record(name)
            if rec is not None:
                st.markdown(f":green[✓] **{get_step(name).title}** · {rec.calls} call(s) · {rec.retries} retries · "
                            f"{rec.seconds:.1f}s" + (" · edited" if rec.edited else ""))
        if job is not None and job.current and alive:
            st.markdown(f":blue[…] **{get_step(job.current).title}** {md_escape(job.detail)}")
        if alive and left:
            st.caption(f"{md_escape(left)}: the finished steps' seconds scaled by their share of a measured one-month "
                       "generation")
    if job is not None:
        st.caption(f"Job {md_escape(job.job_id)}: runs in the app's workers — closing this page does not stop it.")
    if info.error:
        st.error(f"{info.status}: {md_escape(info.error)}" + ("" if alive else " — press Resume to continue."))
    totals = pipeline.cost()
    try:
        cost = md_escape(platform_state.platform_config().estimate(totals.by_model).label())
    except ConfigError as e:  # a config error must not hide the run
        log.warning("generation %s: cost not estimated: %s", run_id, e)
        cost = "cost not estimated (configuration error)"
    st.caption(f"Cost so far: {totals.calls} LLM calls · {totals.tokens_in:,} tokens in · {totals.tokens_out:,} out · "
               f"{cost}")
    if info.status == "finished" and info.uid and info.out:
        render_success(info.uid, Path(info.out))
    key = f"_gen_alive_{run_id}"
    was_alive, st.session_state[key] = st.session_state.get(key, False), alive
    if was_alive and not alive:
        st.rerun()  # the run just ended: redraw the whole page (steps, success link)


def render_success(uid: str, out: Path) -> None:
    """The user is in the folder: register the folder for this session and link to the Users page."""
    known = platform_state.known_dataset_paths()
    name = next((n for n, p in known.items() if Path(p).resolve() == out.resolve()), None)
    if name is None:
        name = name_for_path(out, known)
        st.session_state.setdefault("added_datasets", {})[name] = out
    st.success(f"User {md_escape(uid)} was added to {md_escape(out)}.")
    link = f"/users?dataset={name}&user={uid}".replace("`", "")  # in a code span nothing else is interpreted
    st.caption(f"Link: `{link}`")
    if st.button(f"Open user {md_escape(uid)} in the Users page", key="gen_open_user", icon=":material/person:"):
        st.switch_page("pages/users.py", query_params={"dataset": name, "user": uid})
