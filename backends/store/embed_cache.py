"""Persistent embedding cache: a text embedded once is never embedded again by any process of the same home.

An embedding is a pure function of the embedder (its name and the fingerprint of the code and package versions that
compute it), the text and whether the text is a query or a document. :class:`EmbeddingCache` keeps these vectors in
their own SQLite file (``embeddings.sqlite``, WAL, one table, float32 bytes), so a page that needs only vectors of
texts embedded before (a stored retrieval query, gold and memory statements) never loads the model, and clearing it
never touches records. It is bounded: past ``max_rows`` the least recently used rows are removed (a hit refreshes
its row's time at most once per ``TOUCH_S``, so reading costs no write each time).

Safe beside other processes (the app and a ``pal`` command) and threads: SQLite's WAL and immediate write
transactions (:class:`backends.store.db.Database`). A file that is not a database, or one that breaks while in use,
is logged, moved aside and made anew: the cache is never the reason a page or a command fails.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from backends.store.db import Database

log = logging.getLogger(__name__)
MAX_ROWS = 500_000  # about 800 MB of 384-dimensional vectors at most
TOUCH_S = 3600.0  # a hit refreshes its row's last use at most this often
EVICT_TO = 0.9  # eviction keeps this share of max_rows (the most recently used)
CHECK_EVERY = 2_000  # rows written between two counts of the table
QUERY, DOCUMENT = "q", "d"
_SCHEMA = """CREATE TABLE IF NOT EXISTS embeddings (
    embedder TEXT NOT NULL, kind TEXT NOT NULL, text_sha TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL,
    used REAL NOT NULL, PRIMARY KEY (embedder, kind, text_sha)) WITHOUT ROWID"""
_INDEX = "CREATE INDEX IF NOT EXISTS embeddings_used ON embeddings (used)"
_CHUNK = 400  # texts per lookup statement (SQLite's variable limit is higher; keeps statements small)


def text_key(text: str) -> str:
    """The SHA-256 of a text (the table keeps no text: a statement, a log or a query of a person)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache:
    """Vectors by (embedder fingerprint, query or document, text) in one SQLite file; see the module docstring."""

    def __init__(self, path: Path, open_db: Callable[[Path], Database], *, max_rows: int = MAX_ROWS):
        """``open_db`` opens the file (the composition root passes :class:`Database`), again after a rebuild."""
        self.path = Path(path)
        self._open_db = open_db
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._written = 0
        self.db = self._open()

    # ------------------------------------------------------------------ opening and rebuilding

    def _open(self) -> Database:
        try:
            return self._connect()
        except sqlite3.DatabaseError:
            log.exception("embedding cache %s is unreadable; moving it aside and starting an empty one", self.path)
            self._move_aside()
            return self._connect()

    def _connect(self) -> Database:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():  # private from its first byte, like every state file (its -wal/-shm follow it)
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        db = self._open_db(self.path)
        with db.write() as conn:
            conn.execute(_SCHEMA)
            conn.execute(_INDEX)
        return db

    def _move_aside(self) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(str(self.path) + suffix)
            if part.exists():
                part.replace(Path(str(aside) + suffix))
        log.warning("embedding cache %s moved aside to %s", self.path, aside)

    def _failed(self, db: Database, error: sqlite3.DatabaseError, what: str) -> None:
        """Log a failed statement; a file that is no longer a database is rebuilt, while an operational error (locked
        past the busy timeout, a full disk) leaves the file alone: that read is a miss, that write is not kept."""
        if isinstance(error, sqlite3.OperationalError):
            log.exception("embedding cache %s: %s failed; going on without it", self.path, what)
            return
        log.exception("embedding cache %s: %s failed, the file is broken; rebuilding it", self.path, what)
        self._rebuild(db)

    def _rebuild(self, broken: Database) -> None:
        """Close the broken file, move it aside and open an empty one — unless another thread did so since ``broken``
        (the database the failed statement ran on) was current."""
        with self._lock:
            if self.db is not broken:
                return
            try:
                self.db.close()
            except sqlite3.Error:
                log.exception("closing the broken embedding cache %s", self.path)
            self._move_aside()
            self.db = self._connect()

    # ------------------------------------------------------------------ reading and writing

    def get(self, embedder: str, kind: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vector of each of ``texts`` found (text → float32 vector); a broken file reads as empty."""
        keys, db = {text_key(t): t for t in texts}, self.db
        try:
            return self._get(db, embedder, kind, keys)
        except sqlite3.DatabaseError as e:
            self._failed(db, e, f"reading {len(keys)} vector(s)")
            return {}

    def _get(self, db: Database, embedder: str, kind: str, keys: dict[str, str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        stale: list[str] = []
        now, shas = time.time(), list(keys)
        with db.read() as conn:
            for i in range(0, len(shas), _CHUNK):
                chunk = shas[i:i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for sha, dim, blob, used in conn.execute(
                        f"SELECT text_sha, dim, vector, used FROM embeddings WHERE embedder = ? AND kind = ? "
                        f"AND text_sha IN ({marks})", (embedder, kind, *chunk)):
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.size != dim:
                        continue  # a torn row: embedded again and replaced
                    found[keys[sha]] = vector.copy()
                    if now - used > TOUCH_S:
                        stale.append(sha)
        if stale:
            with db.write() as conn:
                conn.executemany("UPDATE embeddings SET used = ? WHERE embedder = ? AND kind = ? AND text_sha = ?",
                                 [(now, embedder, kind, sha) for sha in stale])
        return found

    def put(self, embedder: str, kind: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Keep the vectors of ``texts`` (row i of ``vectors`` is ``texts[i]``'s); a broken file is rebuilt and
        the vectors are simply not kept."""
        if not len(texts):
            return
        vectors = np.asarray(vectors, dtype=np.float32)
        now = time.time()
        rows = [(embedder, kind, text_key(t), int(v.size), v.tobytes(), now) for t, v in zip(texts, vectors)]
        db = self.db
        try:
            with db.write() as conn:
                conn.executemany("INSERT OR REPLACE INTO embeddings (embedder, kind, text_sha, dim, vector, used) "
                                 "VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._written += len(rows)
            if self._written >= CHECK_EVERY or len(rows) > self.max_rows // 10:
                self._written = 0
                self.evict()
        except sqlite3.DatabaseError as e:
            self._failed(db, e, f"writing {len(rows)} vector(s)")

    def dim(self, embedder: str) -> int | None:
        """The dimension of this embedder's vectors when any is cached (so ``dim`` needs no model either)."""
        db = self.db
        try:
            with db.read() as conn:
                row = conn.execute("SELECT dim FROM embeddings WHERE embedder = ? LIMIT 1", (embedder,)).fetchone()
        except sqlite3.DatabaseError as e:
            self._failed(db, e, "reading the dimension")
            return None
        return None if row is None else int(row[0])

    def evict(self) -> int:
        """Remove the least recently used rows past ``max_rows`` (down to ``EVICT_TO`` of it); how many went."""
        with self.db.write() as conn:
            count = int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
            if count <= self.max_rows:
                return 0
            remove = count - int(self.max_rows * EVICT_TO)
            conn.execute("DELETE FROM embeddings WHERE (embedder, kind, text_sha) IN (SELECT embedder, kind, text_sha "
                         "FROM embeddings ORDER BY used LIMIT ?)", (remove,))
        log.info("embedding cache %s: %d least recently used vector(s) removed (%d kept)", self.path, remove,
                 count - remove)
        return remove

    def size(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
