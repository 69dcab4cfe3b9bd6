"""Generation runs in background threads, shared by every browser session of this server process.

The page only starts, watches and cancels; the pipeline persists each step as it finishes, so a page
rerun or a closed browser loses nothing and reopening ``?run=<id>`` shows the run where it is.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from backends.llm.client import LLMClient
from synth.pipeline import Pipeline
from synth.store import SynthStore


@dataclass
class Job:
    run_id: str
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    current: str | None = None  # step running now
    detail: str = ""  # the call it is making (month, situation, topic)
    lines: list[str] = field(default_factory=list)  # what happened, for st.status
    started: float = field(default_factory=time.time)

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


_JOBS: dict[str, Job] = {}
_LOCK = threading.Lock()


def get(run_id: str) -> Job | None:
    return _JOBS.get(run_id)


def running(run_id: str) -> bool:
    job = _JOBS.get(run_id)
    return job is not None and job.alive


def start(run_id: str, llm: LLMClient, store: SynthStore, rerun_from: str | None = None) -> Job:
    """Run (or continue) ``run_id`` in a background thread; a run already going is left as it is."""
    with _LOCK:
        existing = _JOBS.get(run_id)
        if existing is not None and existing.alive:
            return existing
        job = Job(run_id)

        def on_step(step: str, event: str, record) -> None:
            job.current = step if event == "start" else None
            job.detail = ""
            if event != "start":
                extra = f" · {record.calls} call(s), {record.retries} retries, {record.seconds:.1f}s" if record else ""
                job.lines.append(f"{step}: {event}{extra}")

        def on_call(step: str, unit: str) -> None:
            job.detail = unit

        pipeline = Pipeline(run_id, store, llm, on_step=on_step, on_call=on_call, cancel=job.cancel)

        def work() -> None:
            if rerun_from:
                pipeline.invalidate(rerun_from)
            pipeline.run()

        job.thread = threading.Thread(target=work, name=f"generate-{run_id}", daemon=True)
        _JOBS[run_id] = job
        job.thread.start()
        return job


def cancel(run_id: str) -> None:
    job = _JOBS.get(run_id)
    if job is not None:
        job.cancel.set()


def wait(run_id: str, timeout: float = 60.0) -> None:
    """Block until the run's thread ends (tests and the CLI-like callers)."""
    job = _JOBS.get(run_id)
    if job is not None and job.thread is not None:
        job.thread.join(timeout)
