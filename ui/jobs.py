"""Pages submit long work to the app's job engine and watch it; the work goes on with no page open.

:func:`submit` stores a job whose units run in the engine's worker threads (this browser session's settings and
LLM client travel with it while the app runs; after a restart its stored configuration is used). :func:`follow`
draws a progress bar with an ETA in the script that submitted, until the job ends — closing the tab stops the
drawing, not the work. :func:`watch` is an auto-refreshing fragment for a job found running when a page opens;
:func:`render_jobs` lists jobs with Cancel and Retry for failed units.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

import pandas as pd
import streamlit as st

from backends.llm.client import LLMClient
from jobs.types import JobSpec, JobSummary, UnitSpec, format_seconds
from studio.units import UnitEnv
from ui import platform_state
from ui.platform_state import base_workspace
from ui.presenting import writes_allowed
from ui.text import md_escape

log = logging.getLogger(__name__)

FOLLOW_S = 900.0  # the longest a page's script follows a job it submitted (the job itself goes on)
WORKERS = 4  # the app's worker threads: as many units at once (per-endpoint limits apply inside them)


def new_job_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:10]}"


def submit(kind: str, title: str, units: list[UnitSpec], job_id: str | None = None, llm: LLMClient | None = None) -> str:
    """Store a job for the app's workers, run with this session's configuration and LLM client (or ``llm``)."""
    ws = platform_state.workspace()
    spec = JobSpec(job_id=job_id or new_job_id(kind), kind=kind, title=title, pool="app",
                   created_by=f"session {platform_state.session_id()}", units=units)
    engine = base_workspace().jobs
    engine.start(WORKERS)
    return engine.submit(spec, env=UnitEnv(ws, llm or platform_state.llm_client()))


def follow(job_id: str, label: str, on_tick: Callable[[JobSummary], None] | None = None,
           timeout: float = FOLLOW_S, concurrency: int = WORKERS) -> JobSummary:
    """Draw the job's progress until it ends (or ``timeout``); returns its last summary. ``concurrency``: how many
    of its units can run at once, for the ETA (1 for a chain, e.g. a memory build's sessions)."""
    store = base_workspace().jobs.store
    bar = st.progress(0.0, text=f"{label}…")
    deadline = time.monotonic() + timeout
    while True:
        summary = store.summary(job_id)
        bar.progress(min(summary.progress, 1.0), text=progress_text(label, summary, concurrency))
        if on_tick is not None:
            on_tick(summary)
        if summary.finished or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if summary.finished:
        bar.empty()
    return summary


def progress_text(label: str, summary: JobSummary, concurrency: int = WORKERS) -> str:
    text = f"{label}: {summary.line(concurrency)}"
    running = [u for u in base_workspace().jobs.store.units(summary.job_id, "running")][:2]
    details = "; ".join(f"{u.label}: {u.progress_text}" if u.progress_text else u.label for u in running)
    return md_escape(text + (f" — {details}" if details else ""))


def active_job(prefix: str, kind: str | None = None) -> JobSummary | None:
    """The newest unfinished job whose id starts with ``prefix`` (e.g. a page's job for one run)."""
    # the prefix is matched in SQL: only this page's jobs are summarised (this runs on every rerun)
    return next((s for s in base_workspace().jobs.store.jobs(kind=kind, limit=200, prefix=prefix)
                 if not s.finished), None)


def failure_text(summary: JobSummary) -> str:
    return "; ".join(summary.errors) or summary.status


@st.fragment(run_every=1.5)
def watch(job_id: str, label: str, concurrency: int = WORKERS) -> None:
    """A job found running when the page opened: its progress, refreshed; the page redraws when it ends."""
    summary = base_workspace().jobs.store.summary(job_id)
    st.progress(min(summary.progress, 1.0), text=progress_text(label, summary, concurrency))
    c1, c2 = st.columns([1, 5])
    if not summary.finished and writes_allowed() and c1.button("Cancel", key=f"job_cancel_{job_id}", icon=":material/stop:"):
        base_workspace().jobs.cancel(job_id)
    key = f"_job_seen_{job_id}"
    if summary.finished and st.session_state.get(key) is False:
        st.session_state[key] = True
        st.rerun()
    st.session_state.setdefault(key, summary.finished)


def render_jobs(kind: str | None = None, limit: int = 30) -> None:
    """Every job (of one kind), newest first, with Cancel for running ones and Retry for failed units."""
    engine = base_workspace().jobs
    jobs = engine.store.jobs(kind=kind, limit=limit)
    if not jobs:
        st.info("No jobs yet.")
        return
    rows = [{"job": j.job_id, "title": j.title, "status": j.status, "done": j.counts.get("done", 0), "units": j.total,
             "failed": j.counts.get("failed", 0), "running": j.counts.get("running", 0),
             "ETA": format_seconds(eta) if (eta := j.eta(WORKERS)) is not None else "",
             "started by": j.created_by, "updated": pd.to_datetime(j.updated_at, unit="s")} for j in jobs]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=f"jobs_table_{kind}")
    choice = st.selectbox("Job", [j.job_id for j in jobs], key=f"jobs_pick_{kind}")
    picked = next(j for j in jobs if j.job_id == choice)
    for line in picked.errors:
        st.caption(f"failed: {md_escape(line)}")
    if not writes_allowed():  # presenting: the jobs are shown, not changed
        return
    c1, c2, _ = st.columns([1, 1, 4])
    if c1.button("Cancel", key=f"jobs_cancel_{kind}", disabled=picked.finished, icon=":material/stop:"):
        engine.cancel(choice)
        st.rerun()
    if c2.button("Retry failed", key=f"jobs_retry_{kind}", disabled=not (picked.counts.get("failed") or picked.blocked
                                                                         or picked.status == "cancelled"),
                 icon=":material/replay:"):
        engine.start(WORKERS)
        engine.retry(choice)
        st.rerun()
