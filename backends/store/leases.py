"""Leases: one holder of a resource at a time, until it releases it or the lease expires.

Small and reusable: a simulation run's driver holds ``sim-run:<run id>`` while it advances the run,
so a second tab or ``pal simulate`` does not drive the same run at once (a job engine's unit leases
can use the same table). Taking a lease is one immediate transaction: of two concurrent takers
exactly one wins. An expired lease (its holder went away) may be taken by anyone, and so may the
lease of a holder named with :func:`process_holder` whose process on this machine has died (a killed
``pal simulate`` does not block the next one for the lease's lifetime).
"""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass

from backends.store.db import Database


@dataclass(frozen=True)
class Lease:
    resource: str
    holder: str
    acquired_at: float
    expires_at: float

    def remaining_s(self, now: float | None = None) -> float:
        return max(0.0, self.expires_at - (time.time() if now is None else now))


_PROCESS = re.compile(r"pid=(\d+)@(\S+)")


def process_holder(label: str) -> str:
    """A holder name that says which process holds the lease (``label pid=N@host``)."""
    return f"{label} pid={os.getpid()}@{socket.gethostname()}"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine runs (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def holder_is_dead(holder: str) -> bool:
    """True when ``holder`` names a process on this machine that no longer runs."""
    m = _PROCESS.search(holder)
    return m is not None and m.group(2) == socket.gethostname() and not pid_alive(int(m.group(1)))


class LeaseStore:
    def __init__(self, db: Database):
        self.db = db

    def take(self, resource: str, holder: str, ttl_s: float) -> Lease | None:
        """Take or renew the lease for ``holder``; None when someone else holds it unexpired."""
        now = time.time()
        with self.db.write() as conn:
            row = conn.execute("SELECT holder, acquired_at, expires_at FROM leases WHERE resource=?",
                               (resource,)).fetchone()
            if (row is not None and row["holder"] != holder and row["expires_at"] > now
                    and not holder_is_dead(row["holder"])):
                return None
            acquired = row["acquired_at"] if row is not None and row["holder"] == holder else now
            conn.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?)", (resource, holder, acquired, now + ttl_s))
        return Lease(resource, holder, acquired, now + ttl_s)

    def release(self, resource: str, holder: str) -> bool:
        """Give the lease up (only its holder can); True when it was held by ``holder``."""
        with self.db.write() as conn:
            return conn.execute("DELETE FROM leases WHERE resource=? AND holder=?", (resource, holder)).rowcount == 1

    def holder(self, resource: str) -> Lease | None:
        """The unexpired lease on ``resource``, if any."""
        with self.db.read() as conn:
            row = conn.execute("SELECT holder, acquired_at, expires_at FROM leases WHERE resource=? AND expires_at>?",
                               (resource, time.time())).fetchone()
        return Lease(resource, row[0], row[1], row[2]) if row else None
