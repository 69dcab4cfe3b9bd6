"""What a plan's costs are calibrated on: the static rates (``protocol/plan_rates.toml``: a build's calls per session
and log, the app's CPU per call, each figure with where it was measured) until this home has measured its own —
per-prompt means of the calls accounted, per-method build costs of the stored builds, and the app's CPU per call
of its recorded job runs (:class:`Calibration`, read by :func:`protocol.plan.make_plan`)."""

from __future__ import annotations

import functools
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from backends.store.runstore import RunStore
from jobs.store import JobStore
from memory.store import MemoryStore

RATES_FILE = Path(__file__).with_name("plan_rates.toml")


@functools.lru_cache(maxsize=1)
def load_rates() -> dict:
    """The static rates (``protocol/plan_rates.toml``): build calls per session and log, the app's CPU per call."""
    return tomllib.loads(RATES_FILE.read_text(encoding="utf-8"))


def static_session_calls(method: str, logs: int) -> float:
    """A build's calls for one session of ``logs`` logs before any build of ``method`` was stored here."""
    rate = load_rates()["build"].get(method, {"per_session": 2.0, "per_log": 0.0})
    return float(rate["per_session"] + rate["per_log"] * logs)


DEFAULT_CALL = (700.0, 80.0, 2.0)  # tokens in, tokens out, seconds of one call without calibration


@dataclass
class Calibration:
    """Per-prompt means and per-method build costs from what the run store has accounted so far."""

    prompts: dict[str, tuple[int, float, float, float]]
    sessions: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)  # calls, tin, tout, s
    app_cpu: float | None = None  # this home's measured CPU seconds per call of a job run (None: the rates file's)

    @property
    def cpu_per_call(self) -> tuple[float, bool]:
        """(the app's CPU seconds per call, whether measured here)."""
        if self.app_cpu is not None:
            return self.app_cpu, True
        return float(load_rates()["app"]["cpu_per_call_s"]), False

    @classmethod
    def load(cls, runs: RunStore, memory: MemoryStore, jobs: JobStore | None = None) -> Calibration:
        per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])
        for method, _user, _stage, calls, tin, tout, secs in memory.stage_costs():
            acc = per[method]
            acc[0] += calls
            acc[1] += tin
            acc[2] += tout
            acc[3] += secs
            acc[4] += 0.5  # two stages per session
        sessions = {m: (a[0] / a[4], a[1] / a[4], a[2] / a[4], a[3] / a[4]) for m, a in per.items() if a[4] >= 1}
        return cls(runs.prompt_means(), sessions, app_cpu_per_call(runs, jobs) if jobs is not None else None)

    def call(self, prompt: str) -> tuple[float, float, float, bool]:
        if prompt in self.prompts:
            _n, tin, tout, secs = self.prompts[prompt]
            return tin, tout, secs, True
        return (*DEFAULT_CALL, False)


def app_cpu_per_call(runs: RunStore, jobs: JobStore, newest: int = 20) -> float | None:
    """CPU seconds per LLM call over this home's newest job runs on threads (the calls each made are those
    accounted under its job in its time), or None when none made a call."""
    cpu = calls = 0.0
    for run in jobs.runs("threads")[:newest]:
        with runs.db.read() as conn:
            made = conn.execute("SELECT COUNT(*) FROM llm_calls WHERE session_id=? AND ts BETWEEN ? AND ? "
                                "AND cache_hit=0", (run["job_id"], run["started_at"], run["ended_at"])).fetchone()[0]
        if made:
            cpu, calls = cpu + run["cpu_s"], calls + made
    return cpu / calls if calls else None
