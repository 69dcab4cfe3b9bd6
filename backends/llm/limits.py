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
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
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


class Width(BaseModel):
    """How many calls to one endpoint may be in flight together now, and where that number comes from."""

    endpoint: str
    width: int
    ceiling: int  # the concurrency it grows back to after a 429 (0: no ceiling)
    source: WidthSource
    rate_limited: int = 0  # 429s seen by this process


class EndpointLimiter:
    """One endpoint's limits; thread-safe."""

    def __init__(self, endpoint: str, limits: EndpointLimits, clock=time.monotonic, window: float = WINDOW):
        self.endpoint, self.limits, self.clock, self.window = endpoint, limits, clock, window
        self._cond = threading.Condition()
        self._in_flight = 0
        self._allowed = limits.concurrency or 0  # the adaptive concurrency (0: unlimited)
        self._requests: deque[float] = deque()
        self._tokens: deque[list[float]] = deque()  # [time, tokens] (mutable: corrected after the call)
        self._paused_until = 0.0
        self._strikes = 0
        self.max_in_flight = 0  # the most requests in flight at once (for tests and benches)
        self.rate_limited = 0  # 429s seen
        self.admitted: deque[float] = deque(maxlen=10_000)  # admission times (tests and benches check the windows)

    def _wait_time(self, tokens: int) -> float:
        now = self.clock()
        while self._requests and self._requests[0] <= now - self.window:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= now - self.window:
            self._tokens.popleft()
        waits = [self._paused_until - now]
        if self._allowed and self._in_flight >= self._allowed:
            waits.append(0.5)  # woken by a release (see release); the cap only bounds how late a cancel is seen
        rpm = self.limits.requests_per_minute
        if rpm and len(self._requests) >= rpm:
            waits.append(self._requests[0] + self.window - now)
        tpm = self.limits.tokens_per_minute
        if tpm:
            used = sum(t for _, t in self._tokens)
            if used + tokens > tpm and self._tokens:
                waits.append(self._tokens[0][0] + self.window - now)
        return max(waits)

    def acquire(self, tokens: int, cancel: threading.Event | None = None) -> list[float]:
        tokens = min(tokens, self.limits.tokens_per_minute) if self.limits.tokens_per_minute else tokens
        with self._cond:
            while (wait := self._wait_time(tokens)) > 0:
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"{self.endpoint}: cancelled while waiting for the rate limit")
                self._cond.wait(min(wait, 0.5))
            now = self.clock()
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self._requests.append(now)
            self.admitted.append(now)
            entry = [now, float(tokens)]
            self._tokens.append(entry)
            if not self._allowed or self._in_flight < self._allowed:
                self._cond.notify()  # room for one more: the next waiter looks (see release)
            return entry

    def release(self, entry: list[float], used_tokens: int | None, rate_limited: bool, retry_after: float | None) -> None:
        with self._cond:
            self._in_flight -= 1
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
            # one request ended: one waiter is woken, and each one admitted wakes the next while there is room —
            # waking every waiter on every release (dozens of threads at once) cost more CPU than the requests
            # themselves; a 429 changes every waiter's wait, so all of them look again
            self._cond.notify_all() if rate_limited else self._cond.notify()

    @property
    def allowed(self) -> int:
        return self._allowed

    @property
    def in_flight(self) -> int:
        return self._in_flight


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
                    limiter = self._by_endpoint[key]
                    with limiter._cond:
                        limiter.limits, limiter._allowed = lim, lim.concurrency
                        limiter._cond.notify_all()  # more may be admitted now: every waiter looks again

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
             slots: int | None = None) -> Iterator[Slot]:
        """Hold one request slot of ``endpoint`` (no-op for a provider without limits: in-process or fake)."""
        slot = Slot()
        limiter = self.limiter(endpoint, slots)
        if limiter is None:
            yield slot
            return
        entry = limiter.acquire(tokens, cancel)
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
