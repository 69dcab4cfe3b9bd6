"""How a ``pal`` command runs its work: as a job of the workspace's engine, in the foreground, printing progress.

The command builds a :class:`jobs.types.JobSpec`, submits it with a :class:`studio.units.UnitEnv` whose callbacks
print to stderr, and runs it on its own worker threads (or on Ray with ``--executor ray``). The same units run in
the app's workers, so a command and a page are two ways to start the same work.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from jobs.types import JobSpec, JobSummary

if TYPE_CHECKING:
    from backends.llm.client import LLMClient
    from studio.units import UnitEnv
    from studio.workspace import Workspace


def err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Counter:
    """``[k/total] what`` lines, one per finished unit (units already done before this command count first)."""

    def __init__(self, total: int, done: int = 0):
        self.total, self.done = total, done
        self._lock = threading.Lock()

    def __call__(self, text: str) -> None:
        with self._lock:
            self.done += 1
            err(f"[{self.done}/{self.total}] {text}")


def unit_env(ws: Workspace, llm: LLMClient, counter: Counter | None = None, **kw: Any) -> UnitEnv:
    from studio.units import UnitEnv

    return UnitEnv(ws, llm, line=err, unit_done=counter, **kw)


def run_job(ws: Workspace, spec: JobSpec, env: UnitEnv, concurrency: int = 1, executor: Any = None,
            bar: bool = False, estimates: dict[str, float] | None = None, details: bool = False,
            every: float = 2.0) -> JobSummary:
    """Submit and run ``spec`` here until it ends; ``bar`` prints a progress line with an ETA every ``every`` seconds
    (``estimates``: a plan's seconds per unit of each kind, for the ETA before a kind's first unit finished;
    ``details``: with what the running units report, e.g. a memory build's calls in flight and cached tokens)."""
    job_id = ws.jobs.submit(spec, env=env)
    started = time.perf_counter()
    last = [0.0]

    def show(summary: JobSummary) -> None:
        if bar and (time.perf_counter() - last[0] > every or summary.finished):
            last[0] = time.perf_counter()
            running = [u.progress_text for u in ws.jobs.store.units(job_id, "running") if u.progress_text] \
                if details and not summary.finished else []
            err(f"{progress_bar(summary.progress)} {summary.line(concurrency, estimates)} · "
                f"{time.perf_counter() - started:.0f} s" + "".join(f" — {text}" for text in running[:2]))

    return ws.jobs.run(job_id, concurrency, executor=executor, on_progress=show)


def progress_bar(fraction: float, width: int = 24) -> str:
    filled = int(round(fraction * width))
    return "[" + "#" * filled + "." * (width - filled) + f"] {100 * fraction:5.1f}%"


def failed_lines(summary: JobSummary) -> list[str]:
    return [f"failed: {e}" for e in summary.errors]
