"""Bounded retries with exponential backoff, full jitter and Retry-After, cancellable."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from backends.llm.errors import Cancelled, LLMError, LLMTimeout

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    # a timeout is retried this often at most (None: as often as any retryable error, up to ``max_retries``); the
    # work around a call that still timed out tries once more with longer deadlines (backends/llm/patience.py)
    max_timeouts: int | None = None

    def delay(self, attempt: int, error: LLMError, rng: random.Random) -> float:
        """Seconds to wait before attempt ``attempt + 1``: the server's Retry-After if given, else jittered backoff."""
        if error.retry_after is not None:
            return min(error.retry_after, self.max_retry_after)
        return rng.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    cancel: threading.Event | None = None,
    on_retry: Callable[[int, LLMError, float], None] | None = None,
    rng: random.Random | None = None,
) -> tuple[T, int]:
    """Run ``fn`` until it succeeds or a non-retryable error / the retry budget ends. Returns (result, attempts).
    The jitter's generator is made at the first retry: seeding one reads the system's entropy, and most calls
    succeed at once."""
    attempt = timeouts = 0
    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        try:
            return fn(), attempt + 1
        except LLMError as e:
            timeouts += isinstance(e, LLMTimeout)
            if not e.retryable or attempt >= policy.max_retries or (
                    policy.max_timeouts is not None and timeouts > policy.max_timeouts):
                raise
            rng = rng or random.Random()
            wait = policy.delay(attempt, e, rng)
            log.info("attempt %d failed (%s); retrying in %.1f s", attempt + 1, e, wait)
            if on_retry:
                on_retry(attempt + 1, e, wait)
            if cancel is not None:
                if cancel.wait(wait):
                    raise Cancelled("cancelled while waiting to retry") from e
            else:
                threading.Event().wait(wait)
            attempt += 1
