"""SQLite connections configured for many readers and writers: WAL, busy timeout, foreign keys.

Each operation uses its own short-lived connection (safe across threads and processes). One idle
connection per database file stays open for the life of the process: without it, every close of
the last connection checkpoints and deletes the WAL file, which made each write cost milliseconds.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_KEEPERS: dict[str, sqlite3.Connection] = {}
_KEEPERS_LOCK = threading.Lock()


def _keep_open(path: Path) -> None:
    key = str(path)
    if key in _KEEPERS:
        return
    with _KEEPERS_LOCK:
        if key not in _KEEPERS:
            conn = sqlite3.connect(key, timeout=30.0, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")  # persistent: set once per file
            _KEEPERS[key] = conn


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A short-lived connection in an immediate transaction; commits on success, rolls back on error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _keep_open(path)
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.close()
