"""Generation runs as jobs of the app's engine (one ``synth.generate`` unit per start, resume or re-run).

The page only starts, watches and cancels; the unit runs in the engine's workers whether or not a page is open,
and the pipeline stores each step as it finishes, so reopening ``?run=<id>`` shows the run where it is (after an
app restart too: a unit whose worker died is requeued and continues at the next missing step).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backends.llm.client import LLMClient
from jobs.types import JobSummary, UnitSpec
from synth.store import SynthStore
from ui.platform_state import base_workspace


@dataclass
class JobView:
    """What the page shows of a running generation: the step now, the call it is making."""

    job_id: str
    current: str | None = None
    detail: str = ""
    lines: list[str] = field(default_factory=list)


def _prefix(run_id: str) -> str:
    return f"generate-{run_id}-"


def _latest(run_id: str) -> JobSummary | None:
    jobs = [j for j in base_workspace().jobs.store.jobs(kind="generate", limit=200) if j.job_id.startswith(_prefix(run_id))]
    return max(jobs, key=lambda j: j.created_at) if jobs else None


def start(run_id: str, llm: LLMClient, store: SynthStore, rerun_from: str | None = None) -> str:
    """Submit (or leave running) the generation of ``run_id``; returns the job id."""
    from ui.jobs import new_job_id, submit

    latest = _latest(run_id)
    if latest is not None and not latest.finished:
        return latest.job_id
    unit = UnitSpec(key="generate", kind="synth.generate", label=f"generate {run_id}",
                    payload={"run_id": run_id, "rerun_from": rerun_from})
    return submit("generate", f"generate {run_id}", [unit], job_id=_prefix(run_id) + new_job_id("j"), llm=llm)


def running(run_id: str) -> bool:
    latest = _latest(run_id)
    return latest is not None and not latest.finished


def get(run_id: str) -> JobView | None:
    latest = _latest(run_id)
    if latest is None:
        return None
    engine = base_workspace().jobs
    view = JobView(latest.job_id)
    for unit in engine.store.units(latest.job_id, "running"):
        text = unit.progress_text
        view.current = text.removesuffix(": start") if text.endswith(": start") else None
        live = engine.live(unit.unit_id)
        view.detail = live.detail if live is not None else ""
    return view


def cancel(run_id: str) -> None:
    latest = _latest(run_id)
    if latest is not None:
        base_workspace().jobs.cancel(latest.job_id)


def wait(run_id: str, timeout: float = 60.0) -> None:
    """Block until the run's newest job ends (tests)."""
    latest = _latest(run_id)
    if latest is not None:
        base_workspace().jobs.wait(latest.job_id, timeout)
