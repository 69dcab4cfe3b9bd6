"""Independent calls in flight together, results in order: :func:`fan_out`.

Work whose pieces do not depend on each other (the log-graph windows of a session, one summary per situation, the
per-cluster principles, the per-situation calls of a synthesis step, the samples of a FairEval judgment) maps a
function over its items with :func:`fan_out`. At most :meth:`backends.llm.client.LLMClient.width` items run at once
— the endpoint's concurrency as its limiter allows it now (configured limits, halved on a 429), else the slots the
server declares (the bundled server's ``parallel``, a llama.cpp server's ``/props``), else one: a hosted endpoint
nobody configured is never sent more at once than before. The limiter still admits each request.

Results come back in the order of the items, and the caller merges everything else it keeps (notes, accounting) in
that order too, so a piece of work done concurrently stores exactly what it stored done one call after another.
The first failure in item order is raised once the items already running have ended; no item starts after a
failure or a cancel (items not started then raise :class:`Cancelled`), so a stage or step stopped half way keeps
what its finished calls stored (the response cache, a synthesis step's units) and resumes without asking again.

The items run on the calling thread and on up to ``width - 1`` helpers from one bounded pool of threads kept for
the process (:data:`POOL_THREADS`), not on threads started per call: a protocol run makes thousands of fan-outs,
and each new thread also opens its own database connection. The caller works through the items itself, so a
fan-out inside a fan-out's item always progresses even when every pool thread is busy — helpers only add speed.
A helper runs its items in a copy of the caller's context (:mod:`contextvars`), so they wait for a slot with the
caller's priority (:func:`backends.llm.limits.call_priority`: a job unit's calls all have its unit's).
"""

from __future__ import annotations

import contextvars
import functools
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from backends.llm.errors import Cancelled

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
POOL_THREADS = 128  # the most helper threads the process keeps for fan-outs (callers work too, so any bound is safe)


class _Pool:
    """Daemon helper threads shared by every fan-out of the process: started while tasks wait for one (up to
    ``most``), then kept waiting for the next task."""

    def __init__(self, most: int):
        self.most = most
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = self._idle = self._waiting = 0

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            self._waiting += 1
            if self._waiting > self._idle and self._threads < self.most:
                self._threads += 1
                threading.Thread(target=self._work, name=f"fanout-{self._threads}", daemon=True).start()
        self._tasks.put(task)

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            task = self._tasks.get()
            with self._lock:
                self._idle -= 1
                self._waiting -= 1
            try:
                task()
            except BaseException:  # a task records its item's failure itself; this is a bug in the pool's caller
                log.exception("a fan-out helper task failed")

    @property
    def threads(self) -> int:
        return self._threads


_POOL = _Pool(POOL_THREADS)


class _Call(Generic[T, R]):
    """One fan-out's items: taken one at a time by the caller and its helpers, results and failures by index."""

    def __init__(self, fn: Callable[[T], R], items: list[T], cancel: threading.Event | None):
        self.fn, self.items, self.cancel = fn, items, cancel
        self.results: dict[int, R] = {}
        self.errors: dict[int, BaseException] = {}
        self._next = self._active = 0
        self._closed = False
        self._cond = threading.Condition()

    def _take(self) -> int | None:
        with self._cond:
            if (self._closed or self.errors or self._next >= len(self.items)
                    or (self.cancel is not None and self.cancel.is_set())):
                return None
            self._next += 1
            self._active += 1
            return self._next - 1

    def drain(self) -> None:
        """Run items until none is left to start (or a failure or cancel stops the starting)."""
        while (index := self._take()) is not None:
            try:
                result = self.fn(self.items[index])
            except BaseException as e:  # kept by item; the first in item order is raised by the caller
                log.debug("fan-out item %d of %d failed", index + 1, len(self.items), exc_info=True)
                with self._cond:
                    self.errors[index] = e
            else:
                with self._cond:
                    self.results[index] = result
            finally:
                with self._cond:
                    self._active -= 1
                    self._cond.notify_all()

    def finish(self) -> None:
        """Wait for the items running on helpers; helpers that start later find nothing to do."""
        with self._cond:
            self._closed = True
            while self._active:
                self._cond.wait()


def pool_threads() -> int:
    """How many helper threads the process keeps for fan-outs now (bounded by :data:`POOL_THREADS`)."""
    return _POOL.threads


def fan_out(fn: Callable[[T], R], items: Sequence[T], width: int, cancel: threading.Event | None = None,
            name: str = "fanout") -> list[R]:
    """``[fn(item) for item in items]``, up to ``width`` at once (see the module docstring). ``width`` ≤ 1 or one
    item: run here, one after another, exactly as a loop would."""
    items = list(items)
    if width <= 1 or len(items) <= 1:
        out: list[R] = []
        for item in items:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{name}: cancelled before item {len(out) + 1} of {len(items)}")
            out.append(fn(item))
        return out
    call: _Call[T, R] = _Call(fn, items, cancel)
    for _ in range(min(width, len(items)) - 1):  # one copy of the caller's context per helper (a context runs on one thread)
        _POOL.submit(functools.partial(contextvars.copy_context().run, call.drain))
    try:
        call.drain()
    finally:
        call.finish()
    if call.errors:
        raise call.errors[min(call.errors)]
    if len(call.results) < len(items):
        raise Cancelled(f"{name}: cancelled after {len(call.results)} of {len(items)} items")
    return [call.results[i] for i in range(len(items))]
