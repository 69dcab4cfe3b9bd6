"""One SQLite file shared by many threads and processes: WAL, busy timeout, foreign keys.

A :class:`Database` hands each thread its own connection (reused per thread — opening and
configuring one cost more than most statements run on it) and keeps one idle connection open for
its life: without it, every close of the last connection checkpoints and deletes the WAL file,
which made each write cost milliseconds.

Writes run in ``BEGIN IMMEDIATE`` transactions (:meth:`Database.write`), so two writers never
deadlock on a lock upgrade. The threads of one process queue for the write lock on a Python lock first: SQLite's
busy handler polls with sleeps of up to 100 ms, so threads contending there (dozens of job workers, each recording
calls) would wait long after the lock came free; another process still waits in the busy handler. Reads run in deferred, read-only transactions (:meth:`Database.read`):
under WAL they see one consistent snapshot and never take the write lock, so a slow reader (an export,
a dashboard) cannot delay a writer; a write attempted inside one fails (``PRAGMA query_only``). A connection stays
read-only after a read until its thread's next write turns that off, so reads in a row (most of a job unit's
statements) set nothing.

A database opened ``read_only`` (a workspace opened for presenting) refuses every write: :meth:`Database.write`
raises :class:`ReadOnlyError` and every connection stays ``query_only``, so nothing can change the file.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

log = logging.getLogger(__name__)


class ReadOnlyError(PermissionError):
    """A write asked of a database (or workspace) opened read-only: a presentation changes nothing."""


class Database:
    """A SQLite file; construct one per file and share it (the composition root does)."""

    def __init__(self, path: Path, *, read_only: bool = False):
        self.path = Path(path)
        self._file = str(self.path)  # what the per-transaction existence check stats (no pathlib on the hot path)
        self.read_only = read_only
        if read_only and not self.path.is_file():
            raise FileNotFoundError(f"{self.path}: no such database to open read-only")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._keeper = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None)
        self._keeper.execute("PRAGMA journal_mode=WAL")  # persistent: set once per file
        self._local = threading.local()
        self._writer = threading.RLock()  # this process's writers, in turn (a nested write still fails, below)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA journal_mode=WAL")  # a no-op once the file is in WAL mode; sets it on a recreated file
        if self.read_only:
            conn.execute("PRAGMA query_only=ON")  # for the connection's life: no statement can write
        return conn

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use; reopened if the file was deleted)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and os.path.exists(self._file):
            return conn
        if conn is not None:  # the file was deleted (a test's temporary folder): start afresh
            log.info("database %s was deleted; reopening", self.path)
            conn.close()
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._local.conn = self._open()
        self._local.query_only = self.read_only
        return conn

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection, begin: str) -> Iterator[sqlite3.Connection]:
        if conn.in_transaction:
            raise RuntimeError(f"nested transaction on {self.path} in one thread (would wait on its own lock)")
        conn.execute(begin)
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may already have rolled back (e.g. on a full disk)
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read-only snapshot: a deferred transaction that takes no write lock (inside this thread's own
        open transaction on the file, it reads in that one)."""
        conn = self.connection()
        if conn.in_transaction:  # already inside this thread's transaction on the file: read in it
            yield conn
            return
        if not self._local.query_only:  # left on until this thread writes (a read-only database's: for good)
            conn.execute("PRAGMA query_only=ON")
            self._local.query_only = True
        conn.execute("BEGIN DEFERRED")
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")  # ends the read snapshot (nothing to write)

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        """An immediate transaction: commits on success, rolls back on error (:class:`ReadOnlyError` when read-only)."""
        if self.read_only:
            raise ReadOnlyError(f"{self.path} is open read-only (a presentation): nothing can be written")
        return self._write()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._writer:
            conn = self.connection()
            if self._local.query_only and not conn.in_transaction:  # inside a read, the nesting error below
                conn.execute("PRAGMA query_only=OFF")
                self._local.query_only = False
            with self._transaction(conn, "BEGIN IMMEDIATE") as conn:  # the connection looked up once per write
                yield conn

    def close(self) -> None:
        """Close this thread's connection and the keeper (other threads' connections close with their threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        self._keeper.close()
