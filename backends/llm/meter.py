"""A live meter of one piece of work's LLM calls: in flight now, sent, answered from the response cache, and prompt
tokens the endpoint processed or served from its prompt cache — what a progress bar shows beside it.

A client view made with :meth:`backends.llm.client.LLMClient.metered` counts into a :class:`CallMeter`; whoever
shows progress subscribes with :meth:`CallMeter.watch` and is called after every change (from the calling threads).
The longest-running call in flight is shown with the clock time it started and how long it needs at most at the
endpoint's measured speed (:meth:`CallMeter.expect`, from its deadline's computation): a reading may be shown a while
after it was taken, so it names a time, not an age.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from pydantic import BaseModel

log = logging.getLogger(__name__)


class MeterReading(BaseModel):
    in_flight: int = 0
    sent: int = 0  # calls that reached the endpoint (one however many attempts it took)
    hits: int = 0  # calls answered from the response cache (nothing sent)
    tokens_in: int = 0  # prompt tokens of the sent calls
    tokens_cached: int = 0  # of which the endpoint's prompt cache served (where it said)
    tokens_reported: int = 0  # prompt tokens of the calls whose endpoint said what its cache served
    tokens_out: int = 0
    oldest_started: float | None = None  # epoch seconds: when the longest-running call in flight started
    oldest_need_s: float | None = None  # what that call needs at most at the endpoint's measured speed

    @property
    def cached_share(self) -> float | None:
        """Share of prompt tokens served from the endpoint's cache, over the calls whose endpoint said; None if none."""
        return self.tokens_cached / self.tokens_reported if self.tokens_reported else None

    def line(self) -> str:
        """"2 calls in flight · 31 sent · 41% of 12,345 prompt tokens from the server's cache"."""
        parts = [f"{self.in_flight} call{'s' if self.in_flight != 1 else ''} in flight", f"{self.sent} sent"]
        if self.hits:
            parts.append(f"{self.hits} from the response cache")
        if (share := self.cached_share) is not None:
            parts.append(f"{share:.0%} of {self.tokens_reported:,} prompt tokens from the server's cache")
        if self.in_flight and self.oldest_started is not None:
            since = time.strftime("%H:%M:%S", time.localtime(self.oldest_started))
            need = f", up to ~{_duration(self.oldest_need_s)} at the measured speed" if self.oldest_need_s else ""
            parts.append(f"a call running since {since}{need}")
        return " · ".join(parts)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


class CallMeter:
    """Thread-safe counters of one piece of work's calls (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reading = MeterReading()
        self._watchers: list[Callable[[MeterReading], None]] = []
        self._calls: dict[int, list[float | None]] = {}  # thread → [started (epoch s), need (s)] of its call

    def reading(self) -> MeterReading:
        with self._lock:
            return self._with_oldest()

    def _with_oldest(self) -> MeterReading:
        """The reading with the longest-running call in flight (under the lock)."""
        oldest = min(self._calls.values(), key=lambda c: c[0] or 0.0, default=None)
        return self._reading.model_copy(update={"oldest_started": oldest[0] if oldest else None,
                                                "oldest_need_s": oldest[1] if oldest else None})

    def watch(self, fn: Callable[[MeterReading], None]) -> None:
        with self._lock:
            self._watchers.append(fn)

    def started(self) -> None:
        with self._lock:
            self._calls[threading.get_ident()] = [time.time(), None]
        self._change(in_flight=1)

    def expect(self, seconds: float) -> None:
        """The call this thread has in flight needs at most ``seconds`` at the endpoint's measured speed."""
        with self._lock:
            if (call := self._calls.get(threading.get_ident())) is None:
                return
            call[1] = seconds
        self._change()  # watchers see what the call needs

    def ended(self, tokens_in: int = 0, tokens_cached: int | None = None, tokens_out: int = 0) -> None:
        with self._lock:
            self._calls.pop(threading.get_ident(), None)
        reported = tokens_in if tokens_cached is not None else 0
        self._change(in_flight=-1, sent=1, tokens_in=tokens_in, tokens_cached=tokens_cached or 0,
                     tokens_reported=reported, tokens_out=tokens_out)

    def hit(self) -> None:
        self._change(hits=1)

    def _change(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self._reading, name, getattr(self._reading, name) + delta)
            reading, watchers = self._with_oldest(), list(self._watchers)
        for fn in watchers:
            try:
                fn(reading)
            except Exception:  # a display's failure never fails the call it watches
                log.exception("call meter watcher %r failed", fn)
