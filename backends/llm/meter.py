"""A live meter of one piece of work's LLM calls: in flight now, sent, answered from the response cache, and prompt
tokens the endpoint processed or served from its prompt cache — what a progress bar shows beside it.

A client view made with :meth:`backends.llm.client.LLMClient.metered` counts into a :class:`CallMeter`; whoever
shows progress subscribes with :meth:`CallMeter.watch` and is called after every change (from the calling threads).
"""

from __future__ import annotations

import logging
import threading
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
        return " · ".join(parts)


class CallMeter:
    """Thread-safe counters of one piece of work's calls (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reading = MeterReading()
        self._watchers: list[Callable[[MeterReading], None]] = []

    def reading(self) -> MeterReading:
        with self._lock:
            return self._reading.model_copy()

    def watch(self, fn: Callable[[MeterReading], None]) -> None:
        with self._lock:
            self._watchers.append(fn)

    def started(self) -> None:
        self._change(in_flight=1)

    def ended(self, tokens_in: int = 0, tokens_cached: int | None = None, tokens_out: int = 0) -> None:
        reported = tokens_in if tokens_cached is not None else 0
        self._change(in_flight=-1, sent=1, tokens_in=tokens_in, tokens_cached=tokens_cached or 0,
                     tokens_reported=reported, tokens_out=tokens_out)

    def hit(self) -> None:
        self._change(hits=1)

    def _change(self, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self._reading, name, getattr(self._reading, name) + delta)
            reading, watchers = self._reading.model_copy(), list(self._watchers)
        for fn in watchers:
            try:
                fn(reading)
            except Exception:  # a display's failure never fails the call it watches
                log.exception("call meter watcher %r failed", fn)
