"""Backoff after repeated failed sign-ins, per account name and per client address.

An attempt is counted before its password is checked (:meth:`SignInThrottle.begin`: the wait is read and the attempt
recorded as a failure in one critical section), so a burst of N parallel guesses counts N and the guess after the
``free`` ones waits however many arrive at once; a right password then takes its own attempt back
(:meth:`SignInThrottle.succeeded`).

The first ``free`` failures (5) cost nothing (people mistype); after that each further attempt waits, twice as
long after each failure (1 s, 2 s, … up to a cap) before it is even checked. A success clears only the name's
failures: an address keeps its count, so one valid account does not let an address go on guessing others. A name that does not exist backs off exactly like one that
does, so the throttle reveals nothing about which names exist. State is in memory, shared by every
browser session of the server process, and bounded: entries idle for longer than ``forget_after``
seconds are dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0


class SignInThrottle:
    def __init__(self, free: int = 5, base_s: float = 1.0, cap_s: float = 300.0, forget_after: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 10_000):
        self.free, self.base_s, self.cap_s, self.forget_after = free, base_s, cap_s, forget_after
        self.clock, self.max_keys = clock, max_keys
        self._failures: dict[str, _Failures] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _keys(name: str, client: str | None) -> list[str]:
        keys = [f"name:{name.strip().lower()}"]
        if client:
            keys.append(f"client:{client}")
        return keys

    def _delay(self, f: _Failures) -> float:
        over = f.count - self.free
        return 0.0 if over < 0 else min(self.cap_s, self.base_s * 2 ** over)

    def wait_s(self, name: str, client: str | None) -> float:
        """Seconds until an attempt for ``name`` from ``client`` is checked again (0: now)."""
        now = self.clock()
        with self._lock:
            waits = [f.last + self._delay(f) - now for k in self._keys(name, client)
                     if (f := self._failures.get(k)) is not None]
        return max([0.0, *waits])

    def begin(self, name: str, client: str | None) -> float:
        """Start one attempt: 0 when it may be checked now (it is then already counted as a failure), else the
        seconds to wait (nothing counted). Read and record happen under one lock, so parallel attempts each see
        the ones before them."""
        now = self.clock()
        with self._lock:
            waits = [f.last + self._delay(f) - now for k in self._keys(name, client)
                     if (f := self._failures.get(k)) is not None]
            wait = max([0.0, *waits])
            if wait > 0:
                return wait
            self._count(name, client, now)
        return 0.0

    def confirm_failed(self, name: str, client: str | None) -> None:
        """The password of an attempt counted by :meth:`begin` was wrong: its wait runs from now, the end of the
        check (as it did when failures were counted after checking), not from before the check."""
        now = self.clock()
        with self._lock:
            for key in self._keys(name, client):
                if (f := self._failures.get(key)) is not None:
                    f.last = max(f.last, now)

    def failed(self, name: str, client: str | None) -> None:
        now = self.clock()
        with self._lock:
            self._count(name, client, now)

    def _count(self, name: str, client: str | None, now: float) -> None:
        self._prune(now)
        for key in self._keys(name, client):
            f = self._failures.setdefault(key, _Failures())
            f.count, f.last = f.count + 1, now

    def succeeded(self, name: str, client: str | None, begun: bool = False) -> None:
        """A right password for ``name``: its failures are forgotten (the address's are not); ``begun``: the
        attempt was counted by :meth:`begin`, and the address gets that one back."""
        with self._lock:
            self._failures.pop(self._keys(name, None)[0], None)
            if begun and client and (f := self._failures.get(f"client:{client}")) is not None:
                f.count = max(0, f.count - 1)

    def _prune(self, now: float) -> None:
        if len(self._failures) < self.max_keys:
            return
        for key, f in list(self._failures.items()):
            if now - f.last > self.forget_after:
                del self._failures[key]
        while len(self._failures) >= self.max_keys:  # still full: drop the oldest
            del self._failures[min(self._failures, key=lambda k: self._failures[k].last)]
