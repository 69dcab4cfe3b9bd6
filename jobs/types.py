"""Typed records of the job engine: what is submitted (:class:`JobSpec`, :class:`UnitSpec`) and what is stored
(:class:`Unit`, :class:`JobSummary`)."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

UnitStatus = Literal["queued", "running", "done", "failed", "cancelled"]
STATUSES: tuple[UnitStatus, ...] = ("queued", "running", "done", "failed", "cancelled")


class UnitSpec(BaseModel):
    """One unit to run: ``key`` is unique in its job (the unit id is ``<job id>/<key>``, so submitting the same
    job again adds only new units); ``deps`` are keys of units of the same job that must be done first."""

    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1)
    kind: str
    label: str = ""
    payload: dict[str, Any] = Field(default_factory=dict)
    deps: list[str] = Field(default_factory=list)
    max_attempts: int = Field(1, ge=1, le=20)


class JobSpec(BaseModel):
    """A job: its units, who started it, and the configuration its units run under (role overrides, limits —
    never an API key). ``pool``: ``app`` jobs are run by the app's workers; others only by the process that
    runs them (``pal experiment run``)."""

    model_config = ConfigDict(extra="forbid")
    job_id: str = Field(min_length=1)
    kind: str
    title: str
    created_by: str = "unknown"
    pool: str = "app"
    config: dict[str, Any] = Field(default_factory=dict)
    units: list[UnitSpec]


class Unit(BaseModel):
    """A stored unit. ``status`` is ``running`` only while a worker holds its lease (``lease_until`` in the future)."""

    unit_id: str
    job_id: str
    seq: int
    kind: str
    label: str
    payload: dict[str, Any]
    status: UnitStatus
    attempts: int
    max_attempts: int
    last_error: str | None = None
    progress: float = 0.0
    progress_text: str = ""
    lease_owner: str | None = None
    lease_until: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    seconds: float = 0.0
    result: dict[str, Any] | None = None
    deps: list[str] = Field(default_factory=list)

    @property
    def key(self) -> str:
        return self.unit_id.split("/", 1)[1]


class JobSummary(BaseModel):
    """A job as a page or a command shows it: counts per status, progress, an ETA from the finished units."""

    job_id: str
    kind: str
    title: str
    created_by: str
    pool: str
    cancelled: bool
    created_at: float
    updated_at: float
    counts: dict[str, int]
    total: int
    progress: float  # 0..1: done units plus the running units' own progress
    seconds_done: float  # the finished units' summed run time
    blocked: int = 0  # queued units that wait on a failed or cancelled unit
    by_kind: dict[str, tuple[int, float, int]] = Field(default_factory=dict)  # kind → (done, their seconds, left)
    errors: list[str] = Field(default_factory=list)  # the last errors of failed units (a few)

    @property
    def status(self) -> str:
        """``running`` while anything is queued or running and the job can go on; otherwise how it ended."""
        c = self.counts
        if self.cancelled and not c.get("running"):
            return "cancelled"
        if c.get("running") or (c.get("queued", 0) - self.blocked) > 0:
            return "running"
        if c.get("failed") or self.blocked:
            return "failed"
        return "done" if c.get("done", 0) == self.total else "cancelled"

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed", "cancelled")

    def eta(self, concurrency: int, estimates: dict[str, float] | None = None) -> float | None:
        """Seconds left at ``concurrency`` parallel units: each kind's units left times the mean run time of its
        finished units, or ``estimates[kind]`` (a plan's seconds per unit, scaled by how the finished units
        compared with their estimates) while none of that kind has finished; None while that is unknown."""
        if self.finished or self.counts.get("done", 0) == 0:
            return None
        estimates = estimates or {}
        known = [(k, n, secs) for k, (n, secs, _left) in self.by_kind.items() if n and k in estimates]
        planned = sum(n * estimates[k] for k, n, _ in known)
        scale = sum(secs for _, _, secs in known) / planned if planned > 0 else 1.0
        left = 0.0
        for kind, (n_done, secs, n_left) in self.by_kind.items():
            if not n_left:
                continue
            if n_done:
                left += n_left * secs / n_done
            elif kind in estimates:
                left += n_left * estimates[kind] * scale
            else:
                return None
        return max(0.0, left / max(1, concurrency))

    def line(self, concurrency: int = 1, estimates: dict[str, float] | None = None) -> str:
        """``[done/total] title · 2 running · 1 failed · ETA 3 min``."""
        c = self.counts
        parts = [f"[{c.get('done', 0)}/{self.total}] {self.title}"]
        parts += [f"{c[s]} {s}" for s in ("running", "queued", "failed", "cancelled") if c.get(s)]
        if self.blocked:
            parts.append(f"{self.blocked} blocked by failed units")
        eta = self.eta(concurrency, estimates)
        if eta is not None:
            parts.append(f"ETA {format_seconds(eta)}")
        return " · ".join(parts)


def format_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def now() -> float:
    return time.time()
