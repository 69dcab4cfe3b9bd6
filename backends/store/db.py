"""SQLite connections configured for many readers and writers: WAL, busy timeout, foreign keys.

Each write runs in its own immediate transaction on a connection owned by the calling thread
(safe across threads and processes); reads run in a deferred, read-only transaction
(:func:`reading`), which under WAL never takes the write lock, so a slow reader (an export, a
dashboard) does not hold up writers and writers do not hold up readers. Connections are reused per (thread, file) — opening and
configuring one cost more than most of the statements run on it — with a small bound per thread.
One idle connection per database file also stays open for the life of the process: without it,
every close of the last connection checkpoints and deletes the WAL file, which made each write cost
milliseconds.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_KEEPERS: dict[str, sqlite3.Connection] = {}
_KEEPERS_LOCK = threading.Lock()
_LOCAL = threading.local()
MAX_PER_THREAD = 8  # distinct database files a thread keeps a connection to


def _keep_open(path: Path) -> None:
    key = str(path)
    if key in _KEEPERS:
        return
    with _KEEPERS_LOCK:
        if key not in _KEEPERS:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(key, timeout=30.0, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")  # persistent: set once per file
            _KEEPERS[key] = conn


def _open(key: str) -> sqlite3.Connection:
    conn = sqlite3.connect(key, timeout=30.0, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _thread_connection(path: Path) -> sqlite3.Connection:
    """This thread's connection to ``path`` (opened on first use; the least recently used beyond the bound closes)."""
    pool: OrderedDict[str, sqlite3.Connection] | None = getattr(_LOCAL, "pool", None)
    if pool is None:
        pool = _LOCAL.pool = OrderedDict()
    key = str(path)
    conn = pool.get(key)
    if conn is not None and path.exists():
        pool.move_to_end(key)
        return conn
    if conn is not None:  # the file was deleted (a test's temporary folder): start afresh
        pool.pop(key).close()
    _keep_open(path)
    conn = pool[key] = _open(key)
    while len(pool) > MAX_PER_THREAD:
        pool.popitem(last=False)[1].close()
    return conn


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """An immediate transaction on this thread's connection; commits on success, rolls back on error."""
    conn = _thread_connection(path)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite may already have rolled back (e.g. on a full disk)
            conn.execute("ROLLBACK")
        raise


@contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only snapshot on this thread's connection: a deferred transaction that takes no write lock.

    Every statement inside sees the same snapshot of the database. A write attempted inside fails
    (``PRAGMA query_only``), so a read path cannot take the write lock by mistake.
    """
    conn = _thread_connection(path)
    if conn.in_transaction:  # already inside this thread's transaction on the file: read in it
        yield conn
        return
    conn.execute("PRAGMA query_only=ON")
    conn.execute("BEGIN DEFERRED")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")  # ends the read snapshot (nothing to write)
        conn.execute("PRAGMA query_only=OFF")
