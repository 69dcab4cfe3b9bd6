"""Per-endpoint request limits shared by every client of a process: concurrent requests, requests per minute,
tokens per minute, and adaptive backoff on HTTP 429.

The workspace holds one :class:`Limiters` (so every job, page and command of a process shares it); the LLM
client takes a :class:`Slot` around each attempt of each call. Requests/min and tokens/min are sliding
one-minute windows (a request is admitted when the window has room; tokens are reserved from an estimate and
corrected with the usage the endpoint reported). On a 429 the endpoint's concurrency is halved (down to one)
and every request waits out the server's Retry-After (or a backoff that doubles per consecutive 429); each
success then adds one back, up to the configured limit (additive increase, multiplicative decrease).

An endpoint nobody configured gets the concurrency its server says it serves at once (the bundled server's
``parallel``, a llama.cpp server's slots), so requests wait here rather than in the server's queue, where their
HTTP timeout would run; a network endpoint (``http(s)://``) whose server says nothing — vLLM, a hosted API, a
proxy — gets :data:`DEFAULT_CONCURRENCY`, halved on a 429 and grown back on success like a configured one, so
independent calls (a judgment's samples, a build's windows) go out together instead of one after another.
:meth:`Limiters.width` is how many independent calls a piece of work may have in flight together
(:mod:`backends.llm.fanout`); :meth:`Limiters.describe` says where that number comes from (the Settings page).

Requests that cannot go at once wait in the limiter's own queue, ordered by priority, then by arrival: a request of
higher priority is admitted before every lower one that waits, those of one priority first come, first served, and
nobody overtakes the queue while someone waits in it. A request's priority is the :func:`call_priority` its thread
(or the work that fanned it out, :mod:`backends.llm.fanout`) runs under: the job engine gives each unit's calls the
unit's height in its job's graph (how many units wait on it, one after another), so the calls of work on a job's
critical path — a memory build's chain of sessions, which everything after it waits for — go first, and the rest
fill the slots they leave; a lower call waits only while a higher one waits too. Whoever gives a slot back hands it
to the head of the queue there and then (its bookkeeping done on the head's behalf), so a freed slot is never idle
while the woken thread is still being scheduled, and nobody who came later can take it first.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

from pydantic import BaseModel

from backends.config import EndpointLimits
from backends.llm.errors import Cancelled

log = logging.getLogger(__name__)

WINDOW = 60.0
UNBOUNDED_WIDTH = 8  # calls in flight together where limits are configured without a concurrency and no slots known
# requests in flight at once to an http(s) endpoint nobody configured and whose server does not say: enough for a
# k = 3 judgment's two orders at once, few enough that a 429 (which halves it) is rare on a hosted API's lowest tier
DEFAULT_CONCURRENCY = 8
NETWORK_SCHEMES = ("http://", "https://")
WidthSource = Literal["configured", "server slots", "default", "none"]
CANCEL_POLL_S = 0.5  # the longest a waiting request goes without looking at its cancel flag
_PRIORITY: ContextVar[int] = ContextVar("llm_call_priority", default=0)


@contextmanager
def call_priority(level: int) -> Iterator[None]:
    """Calls made inside (on this thread, and on the fan-out helpers of work started here) wait for a slot with
    priority ``level``: higher goes first (default 0)."""
    token = _PRIORITY.set(level)
    try:
        yield
    finally:
        _PRIORITY.reset(token)


def current_priority() -> int:
    """The priority calls made here wait with (see :func:`call_priority`)."""
    return _PRIORITY.get()


class Width(BaseModel):
    """How many calls to one endpoint may be in flight together now, and where that number comes from."""

    endpoint: str
    width: int
    ceiling: int  # the concurrency it grows back to after a 429 (0: no ceiling)
    source: WidthSource
    rate_limited: int = 0  # 429s seen by this process


class _Waiter:
    """One request waiting in a limiter's queue: its tokens, its wake-up, and the admission granted to it."""

    __slots__ = ("tokens", "wake", "entry")

    def __init__(self, tokens: int, lock: threading.Lock):
        self.tokens = tokens
        self.wake = threading.Condition(lock)
        self.entry: list[float] | None = None  # set by whoever admitted it


class EndpointLimiter:
    """One endpoint's limits and its queue of waiting requests (see the module docstring); thread-safe."""

    def __init__(self, endpoint: str, limits: EndpointLimits, clock=time.monotonic, window: float = WINDOW):
        self.endpoint, self.limits, self.clock, self.window = endpoint, limits, clock, window
        self._lock = threading.Lock()
        self._in_flight = 0
        self._allowed = limits.concurrency or 0  # the adaptive concurrency (0: unlimited)
        self._requests: deque[float] = deque()
        self._tokens: deque[list[float]] = deque()  # [time, tokens] (mutable: corrected after the call)
        self._paused_until = 0.0
        self._strikes = 0
        self._queue: list[tuple[int, int, _Waiter]] = []  # heap of (-priority, arrival, waiter)
        self._arrivals = itertools.count()
        self.max_in_flight = 0  # the most requests in flight at once (for tests and benches)
        self.rate_limited = 0  # 429s seen
        self.admitted: deque[float] = deque(maxlen=10_000)  # admission times (tests and benches check the windows)
        self.holds: deque[float] = deque(maxlen=10_000)  # seconds each of the last requests held its slot (benches)
        # seconds from a slot handed to a waiter to the waiter running again (benches: what a busy machine adds)
        self.handoffs: deque[float] = deque(maxlen=10_000)

    def _wait_time(self, tokens: int) -> float:
        """Seconds until a request of ``tokens`` may go (≤ 0: now); a full endpoint waits for a release."""
        now = self.clock()
        while self._requests and self._requests[0] <= now - self.window:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= now - self.window:
            self._tokens.popleft()
        waits = [self._paused_until - now]
        if self._allowed and self._in_flight >= self._allowed:
            waits.append(CANCEL_POLL_S)  # handed a slot by a release (see _grant); the cap bounds how late a cancel is seen
        rpm = self.limits.requests_per_minute
        if rpm and len(self._requests) >= rpm:
            waits.append(self._requests[0] + self.window - now)
        tpm = self.limits.tokens_per_minute
        if tpm:
            used = sum(t for _, t in self._tokens)
            if used + tokens > tpm and self._tokens:
                waits.append(self._tokens[0][0] + self.window - now)
        return max(waits)

    def _admit(self, tokens: int) -> list[float]:
        now = self.clock()
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        self._requests.append(now)
        self.admitted.append(now)
        entry = [now, float(tokens)]
        self._tokens.append(entry)
        return entry

    def _grant(self) -> None:
        """Admit the head of the queue, and the next, while each may go now; each admitted waiter is woken with its
        admission in hand (so nobody arriving meanwhile can take its slot)."""
        while self._queue and self._wait_time((head := self._queue[0][2]).tokens) <= 0:
            heapq.heappop(self._queue)
            head.entry = self._admit(head.tokens)
            head.wake.notify()
        if self._queue and not (self._allowed and self._in_flight >= self._allowed):
            self._queue[0][2].wake.notify()  # the head waits for a window or a pause: it works out how long again

    def acquire(self, tokens: int, cancel: threading.Event | None = None, priority: int | None = None) -> list[float]:
        """Admit one request of about ``tokens`` tokens, waiting in the queue while it may not go (see the module
        docstring); ``priority``: the caller's :func:`current_priority` unless given. Raises :class:`Cancelled` when
        ``cancel`` is set while it waits."""
        tokens = min(tokens, self.limits.tokens_per_minute) if self.limits.tokens_per_minute else tokens
        with self._lock:
            if not self._queue and self._wait_time(tokens) <= 0:
                return self._admit(tokens)
            waiter = _Waiter(tokens, self._lock)
            item = (-(current_priority() if priority is None else priority), next(self._arrivals), waiter)
            heapq.heappush(self._queue, item)
            self._grant()
            try:
                while waiter.entry is None:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled(f"{self.endpoint}: cancelled while waiting for the rate limit")
                    wait = self._wait_time(tokens) if self._queue[0][2] is waiter else CANCEL_POLL_S
                    waiter.wake.wait(min(max(wait, 0.001), CANCEL_POLL_S))
                    if waiter.entry is None and self._queue[0][2] is waiter:
                        self._grant()  # the head whose window or pause has passed admits itself
            except BaseException:  # cancelled or interrupted: out of the queue, and a slot granted meanwhile back
                log.debug("%s: a request stopped waiting for a slot", self.endpoint, exc_info=True)
                self._leave(item)
                raise
            self.handoffs.append(self.clock() - waiter.entry[0])
            return waiter.entry

    def _leave(self, item: tuple[int, int, _Waiter]) -> None:
        """A waiter that stops waiting: out of the queue (the one behind it may be the head now), or its slot given
        back when one was granted to it meanwhile."""
        if item[2].entry is not None:
            self._in_flight -= 1
        else:
            self._queue.remove(item)
            heapq.heapify(self._queue)
        self._grant()

    def release(self, entry: list[float], used_tokens: int | None, rate_limited: bool, retry_after: float | None) -> None:
        with self._lock:
            self._in_flight -= 1
            self.holds.append(self.clock() - entry[0])
            if used_tokens is not None:
                entry[1] = float(used_tokens)
            if rate_limited:
                self.rate_limited += 1
                self._strikes += 1
                pause = retry_after if retry_after is not None else min(self.limits.max_backoff,
                                                                        0.5 * 2 ** (self._strikes - 1))
                self._paused_until = max(self._paused_until, self.clock() + min(pause, self.limits.max_backoff))
                if self._allowed == 0:  # unlimited so far: start from what was in flight
                    self._allowed = max(1, self._in_flight + 1)
                self._allowed = max(1, self._allowed // 2)
                log.info("%s: 429, concurrency now %d, pausing %.1f s", self.endpoint, self._allowed, pause)
            else:
                self._strikes = 0
                ceiling = self.limits.concurrency
                if self._allowed and (not ceiling or self._allowed < ceiling):
                    self._allowed += 1
                    if not ceiling and self._allowed > 4096:
                        self._allowed = 0
            # the freed slot goes to the head of the queue here and now: one waiter woken, already admitted
            self._grant()

    def adopt(self, limits: EndpointLimits) -> None:
        """New configured limits (the adaptive concurrency starts from them); waiters that may go now are admitted."""
        with self._lock:
            self.limits, self._allowed = limits, limits.concurrency
            self._grant()

    @property
    def allowed(self) -> int:
        return self._allowed

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Requests waiting in the queue now."""
        return len(self._queue)


class Slot:
    """One admitted request; tell it the tokens the endpoint reported, or that it was rate limited."""

    def __init__(self) -> None:
        self.used_tokens: int | None = None
        self.rate_limited = False
        self.retry_after: float | None = None


class Limiters:
    """Every endpoint's limiter in one process, by endpoint (``scheme://host:port/path``)."""

    def __init__(self, limits: dict[str, EndpointLimits] | None = None, window: float = WINDOW):
        """``window``: the span of the per-minute limits (shorter only in tests)."""
        self.window = window
        self._limits = {k.rstrip("/"): v for k, v in (limits or {}).items()}
        self._by_endpoint: dict[str, EndpointLimiter] = {}
        self._lock = threading.Lock()

    def configure(self, limits: dict[str, EndpointLimits]) -> None:
        """Set (or change) limits; an endpoint's limiter keeps its windows and adopts the new numbers."""
        with self._lock:
            for endpoint, lim in limits.items():
                key = endpoint.rstrip("/")
                if self._limits.get(key) == lim:
                    continue  # unchanged (every page run configures): keep the adaptive state
                self._limits[key] = lim
                if key in self._by_endpoint:
                    self._by_endpoint[key].adopt(lim)

    def limiter(self, endpoint: str, slots: int | None = None) -> EndpointLimiter | None:
        """The endpoint's limiter: its configured limits, else ``slots`` at once when its server says, else
        :data:`DEFAULT_CONCURRENCY` for a network endpoint (None: an in-process or fake provider)."""
        key = endpoint.rstrip("/")
        with self._lock:
            if key not in self._by_endpoint:
                limits = self._limits.get(key) or default_limits(key, slots)
                if limits is None:
                    return None
                self._by_endpoint[key] = EndpointLimiter(key, limits, window=self.window)
            return self._by_endpoint[key]

    def width(self, endpoint: str, slots: int | None = None) -> int:
        """How many calls to ``endpoint`` may be in flight together now: its concurrency as the limiter allows it
        (configured, the server's ``slots``, else the default for a network endpoint; halved after a 429), else 1
        (a provider without a network endpoint)."""
        limiter = self.limiter(endpoint, slots)
        if limiter is None:
            return 1
        return limiter.allowed or slots or UNBOUNDED_WIDTH

    def describe(self, endpoint: str, slots: int | None = None) -> Width:
        """:meth:`width` with its source: configured limits, the server's slots, the default, or none."""
        key = endpoint.rstrip("/")
        limiter = self.limiter(key, slots)
        if limiter is None:
            return Width(endpoint=key, width=1, ceiling=1, source="none")
        source: WidthSource = ("configured" if key in self._limits else "server slots" if slots else "default")
        return Width(endpoint=key, width=self.width(key, slots), ceiling=limiter.limits.concurrency,
                     source=source, rate_limited=limiter.rate_limited)

    @contextmanager
    def slot(self, endpoint: str, tokens: int, cancel: threading.Event | None = None,
             slots: int | None = None, priority: int | None = None) -> Iterator[Slot]:
        """Hold one request slot of ``endpoint`` (no-op for a provider without limits: in-process or fake);
        ``priority``: the caller's :func:`current_priority` unless given."""
        slot = Slot()
        limiter = self.limiter(endpoint, slots)
        if limiter is None:
            yield slot
            return
        entry = limiter.acquire(tokens, cancel, priority)
        try:
            yield slot
        finally:
            limiter.release(entry, slot.used_tokens, slot.rate_limited, slot.retry_after)


def default_limits(endpoint: str, slots: int | None) -> EndpointLimits | None:
    """The limits of an endpoint nobody configured: ``slots`` at once when its server says, else
    :data:`DEFAULT_CONCURRENCY` for a network endpoint; None for an in-process or fake provider."""
    if slots:
        return EndpointLimits(concurrency=slots)
    if endpoint.startswith(NETWORK_SCHEMES):
        return EndpointLimits(concurrency=DEFAULT_CONCURRENCY)
    return None
