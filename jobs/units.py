"""What a job's units are to the engine: the context a unit's function gets (:class:`UnitContext`), the unit kinds
registered by name (:class:`Registry`), a unit run once more with longer deadlines after a timeout
(:func:`run_patiently`), and a unit's progress written at most every so often (:class:`ThrottledProgress`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backends.llm.errors import Cancelled, LLMTimeout
from jobs.types import Unit

log = logging.getLogger(__name__)


@dataclass
class UnitContext:
    """What a unit's function gets: the unit, the environment its job runs in (the composition root's
    workspace under the job's configuration), a cancel flag and a progress reporter."""

    unit: Unit
    env: Any
    cancel: threading.Event
    report: Callable[[float, str], None]
    detail: str = ""  # in-process only: e.g. the text an assistant is streaming now
    watched: bool = True  # a page of this process may show the unit's detail as it is written

    @property
    def payload(self) -> dict[str, Any]:
        return self.unit.payload

    def progress(self, done: int, total: int, text: str = "") -> None:
        self.report(done / total if total else 1.0, text)

    def check(self) -> None:
        """Raise :class:`Cancelled` when the job was cancelled (call between two pieces of work)."""
        if self.cancel.is_set():
            raise Cancelled(f"{self.unit.label}: cancelled")


UnitFn = Callable[[UnitContext], dict | None]


def run_patiently(fn: UnitFn, ctx: UnitContext) -> dict | None:
    """``fn(ctx)``; a unit whose LLM call timed out runs once more in its environment's patient form
    (``env.patient()``: longer deadlines, :mod:`backends.llm.patience`) before it fails — unless the work inside
    already asked again patiently. The unit's work is resumable, so the second run redoes nothing finished."""
    try:
        return fn(ctx)
    except LLMTimeout as e:
        patient = getattr(ctx.env, "patient", None)
        if e.after_patience or not callable(patient):
            raise
        log.warning("unit %s (%s): a call timed out (%s); running it once more with longer deadlines",
                    ctx.unit.unit_id, ctx.unit.label, e)
        ctx.env = patient()
        return fn(ctx)


@dataclass
class UnitKind:
    """A registered kind: its function, and whether a unit wants a GPU when the executor has one."""

    name: str
    run: UnitFn
    wants_gpu: Callable[[dict[str, Any]], bool] = field(default=lambda payload: False)


class Registry:
    """Unit kinds by name (the composition root registers the domains' functions)."""

    def __init__(self) -> None:
        self._kinds: dict[str, UnitKind] = {}

    def register(self, name: str, run: UnitFn, wants_gpu: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self._kinds[name] = UnitKind(name, run, wants_gpu or (lambda payload: False))

    def get(self, name: str) -> UnitKind:
        try:
            return self._kinds[name]
        except KeyError:
            raise KeyError(f"no unit kind {name!r} (kinds: {', '.join(sorted(self._kinds))})") from None

    def names(self) -> list[str]:
        return sorted(self._kinds)


class ThrottledProgress:
    """A unit's progress, written at most every ``every`` seconds (a write takes the store's write lock, which
    every worker shares); the latest report waits and is written by the next one due or by :meth:`flush`."""

    def __init__(self, write: Callable[[float, str], None], every: float):
        self.write, self.every = write, every
        self._last = -every
        self._pending: tuple[float, str] | None = None
        self._lock = threading.Lock()

    def report(self, fraction: float, text: str) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._last < self.every:
                self._pending = (fraction, text)
                return
            self._last, self._pending = now, None
        self.write(fraction, text)

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self.write(*pending)
