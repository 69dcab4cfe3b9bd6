"""Automated simulation runs on the Simulate page: a job of the app's engine steps them, the page watches.

Start or Resume with no side taken over submits one ``sim.run`` unit for the run (or both compared runs, stepped
alternately); the script that submitted draws each utterance as it is stored, and a page opened later watches
with an auto-refreshing fragment. The run goes on with the tab closed. "Take over" stops the job between two
utterances and hands the runs to this browser session's interactive mode (:mod:`ui.simulate.live`).
"""

from __future__ import annotations

import logging
import time

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from jobs.types import JobSummary, UnitSpec
from palset.dataset import Dataset
from sim.store import SimStore
from sim.types import RunRecord, RunSpec
from ui.jobs import FOLLOW_S, active_job, new_job_id, submit
from ui.platform_state import base_workspace
from ui.simulate.checks import render_run_checks, stored_checks
from ui.simulate.status import run_status, status_line
from ui.simulate.transcript import (
    FOLLOW_TURNS,
    columns_for,
    export_buttons,
    follow_newest,
    render_utterance,
    run_header,
)
from ui.text import md_escape
from ui.trace import render_trace_link

log = logging.getLogger(__name__)

JOBS, FOLLOW, WATCHED = "sim_jobs", "sim_follow", "sim_watched"
FOLLOW_TICK_S = 0.5


def render_status(slot: DeltaGenerator, record: RunRecord, started: float) -> None:
    """The run's turn n of N, phase, elapsed time and ETA (or why it ended) as a progress bar in ``slot``."""
    ws = base_workspace()
    last = record.utterances[-1].created_at if record.utterances else 0.0
    since = [c for c in ws.runs.calls_of(record.run_id) if float(c["ts"]) > last]
    status = run_status(record, since, time.time(), started, ws.runs.prompt_means())
    slot.progress(status.fraction, text=md_escape(status_line(status)))


def start(dataset: Dataset, specs: list[tuple[RunSpec, str | None]]) -> str:
    """Submit the runs to the engine; this session follows them from now on."""
    from sim.store import run_id_for
    from ui import platform_state

    ws, llm = platform_state.workspace(), platform_state.llm_client()
    for spec, pair in specs:  # the runs exist (and are resumable) from now on, whenever a worker takes them up
        ws.open_simulation(dataset, spec, llm, pair_id=pair).resume()
    ids = [run_id_for(s) for s, _ in specs]
    unit = UnitSpec(key="run", kind="sim.run", label=" + ".join(ids),
                    payload={"dataset": str(dataset.root), "specs": [s.model_dump() for s, _ in specs],
                             "pair_id": specs[0][1]})
    job_id = submit("simulate", f"simulate {' vs '.join(s.method for s, _ in specs)}", [unit],
                    job_id=f"sim-{ids[0]}-{new_job_id('j')}")
    jobs = st.session_state.setdefault(JOBS, {})
    for run_id in ids:
        jobs[run_id] = job_id
    st.session_state[FOLLOW] = True
    return job_id


def job_for(ids: list[str]) -> JobSummary | None:
    """The job of these runs: the one this session started, else one running for them (another session's)."""
    store = base_workspace().jobs.store
    mine = st.session_state.get(JOBS, {}).get(ids[0])
    if mine and store.exists(mine):
        return store.summary(mine)
    return active_job(f"sim-{ids[0]}-", kind="simulate")


def stop(job_id: str) -> None:
    """Cancel the job: its unit stops between two utterances and marks the runs stopped (resumable)."""
    engine = base_workspace().jobs
    engine.cancel(job_id)
    engine.wait(job_id, 30)


def render_job_run(dataset: Dataset, ids: list[str], summary: JobSummary, on_take_over) -> None:
    """The runs of a job: controls, transcripts (followed or watched while the job runs), exports when done."""
    store = base_workspace().sims
    if not summary.finished:
        c1, c2, c3 = st.columns([1, 1, 4])
        c3.toggle("Follow new turns", value=True, key=FOLLOW_TURNS,
                  help="Scroll down to each turn as it is stored (switch off to read earlier turns).")
        if c1.button("Stop", key="sim_stop", icon=":material/stop:",
                     help="Ends the run cleanly: every saved turn stays, and Resume continues it."):
            stop(summary.job_id)
            st.rerun()
        if c2.button("Take over", key="sim_take_over", icon=":material/person:",
                     help="Stop the automated run and continue it here, typing either side yourself."):
            stop(summary.job_id)
            on_take_over()
            st.rerun()
        st.caption("This run goes on in the app's workers: closing the page does not stop it.")
        if st.session_state.pop(FOLLOW, False):
            _follow(store, ids, summary.job_id)
            st.rerun()
        _watch(ids, summary.job_id)
        return
    records = [store.load(i) for i in ids]
    if any(r.status in ("failed", "stopped") for r in records):
        if st.button("Resume", key="sim_resume", type="primary", icon=":material/play_arrow:"):
            start(dataset, [(r.spec, r.pair_id) for r in records])
            st.rerun()
    for col, record in zip(columns_for(len(records)), records):
        with col:
            run_header(record)
            render_trace_link(record.run_id)
            result = stored_checks(record.run_id)
            render_run_checks(record, dataset, result)
            for utt in record.utterances:
                render_utterance(utt, record.run_id, result.turn(utt.turn_no) if result and utt.side == "user" else None)
            if record.status == "failed":
                st.error(f"{md_escape(record.error or 'failed')}. Every saved turn is kept; press Resume to continue.")
            export_buttons(record)


def _follow(store: SimStore, ids: list[str], job_id: str) -> None:
    """Draw each utterance as the job stores it, the text being streamed and where each run is (turn, phase,
    elapsed, ETA), following the newest turn down the page, until the job ends."""
    # the script runs on while it follows, and Streamlit greys out (keeps) the previous run's elements until a
    # script ends: hide them, so the setup's widgets go at once instead of sitting greyed out below the run
    st.html("<style>[data-stale='true'] { display: none !important; }</style>")
    records = [store.load(i) for i in ids]
    bodies, writing, bars, shown = [], [], [], [0] * len(ids)
    for col, record in zip(columns_for(len(records)), records):
        with col:
            run_header(record)
            bodies.append(st.container())
            writing.append(st.empty())
            bars.append(st.empty())
    scroller = st.empty()
    engine = base_workspace().jobs
    deadline, moves = time.monotonic() + FOLLOW_S, 0
    while True:
        summary = engine.store.summary(job_id)
        live = engine.live(f"{job_id}/run")
        text = live.detail if live is not None else ""
        for n, run_id in enumerate(ids):
            record = store.load(run_id)
            for utt in record.utterances[shown[n]:]:
                with bodies[n]:
                    render_utterance(utt, run_id)
            if len(record.utterances) > shown[n]:
                moves += 1
                follow_newest(scroller, moves)
            shown[n] = len(record.utterances)
            if text and record.status == "running":
                writing[n].caption(f"writing… {md_escape(text[-300:])}")
            else:
                writing[n].empty()
            render_status(bars[n], record, summary.created_at)
        if summary.finished or time.monotonic() > deadline:
            break
        time.sleep(FOLLOW_TICK_S)
    for w in writing:
        w.empty()


@st.fragment(run_every=1.5)
def _watch(ids: list[str], job_id: str) -> None:
    """A run found going on when the page opened: its transcript, refreshed; the page redraws when it ends."""
    store = base_workspace().sims
    summary = base_workspace().jobs.store.summary(job_id)
    records: list[RunRecord] = [store.load(i) for i in ids]
    for col, record in zip(columns_for(len(records)), records):
        with col:
            run_header(record)
            for utt in record.utterances:
                render_utterance(utt, record.run_id)
            render_status(st.empty(), record, summary.created_at)
    seen = sum(len(r.utterances) for r in records)
    if seen != st.session_state.get(WATCHED):
        st.session_state[WATCHED] = seen
        follow_newest(st.empty(), seen)
    if summary.finished:
        time.sleep(0.05)
        st.rerun()
