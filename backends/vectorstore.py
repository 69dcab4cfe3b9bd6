"""Vector stores: ChromaDB (persistent, under PAL_HOME) and a brute-force numpy store for tests.

Collections are namespaced by dataset, user, memory method and layer. Our embedder always computes
the vectors (``embeddings=`` / ``query_embeddings=``) and is also attached to every collection, so
Chroma never falls back to its default embedding function, which downloads a model.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from backends.chroma_filter import MetadataMirror, Unsupported, keep_sparse_targets
from backends.embeddings import Embedder, LazyEmbedder, load_embedder

log = logging.getLogger(__name__)

MIRRORED_IDS = 5000  # the most ids a filtered query names to Chroma (more: Chroma filters itself)
MIRRORED_VECTORS = 20000  # a larger collection is filtered by Chroma (its mirror would be slow to read and big)
MIRROR_CHECK_S = 1.0  # how often a mirror's size is checked against its collection's (another process's writes)


@dataclass(frozen=True)
class Namespace:
    """Which memory a collection holds: (dataset, user, method, layer)."""

    dataset: str
    user: str
    method: str
    layer: str

    @property
    def collection_name(self) -> str:
        """A valid Chroma name (3–512 chars of ``[A-Za-z0-9._-]``), readable and collision-free."""
        readable = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{self.dataset}_{self.user}_{self.method}_{self.layer}")[:80]
        digest = hashlib.sha1("\x1f".join((self.dataset, self.user, self.method, self.layer)).encode()).hexdigest()[:10]
        return f"pal_{readable.strip('-_')}_{digest}"

    def as_metadata(self) -> dict[str, str]:
        return {"dataset": self.dataset, "user": self.user, "method": self.method, "layer": self.layer}


@dataclass(frozen=True)
class Hit:
    id: str
    text: str
    score: float  # cosine similarity
    metadata: dict[str, Any]


class VectorStore(Protocol):
    def upsert(self, ns: Namespace, ids: list[str], texts: list[str], metadatas: list[dict[str, Any]] | None = None) -> None: ...

    def query(self, ns: Namespace, text: str, k: int = 3, where: dict[str, Any] | None = None) -> list[Hit]: ...

    def delete(self, ns: Namespace, ids: list[str] | None = None, where: dict[str, Any] | None = None) -> None: ...

    def count(self, ns: Namespace) -> int: ...

    def update_metadata(self, ns: Namespace, ids: list[str], metadatas: list[dict[str, Any]]) -> None: ...


def _clean_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Chroma accepts str/int/float/bool values only, and no empty dict."""
    out = {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))}
    return out or {"_": 0}


def _chroma_embedding_function(embedder: Embedder) -> Any:
    """Our embedder as a Chroma embedding function. Chroma rebuilds functions from a collection's stored config
    (``build_from_config``) also just to check them (``is_legacy``, every collection opened): the rebuilt one is a
    :class:`LazyEmbedder`, so that check loads no model."""
    from chromadb.api.types import EmbeddingFunction

    class _PalEmbedding(EmbeddingFunction):
        def __init__(self) -> None:
            self._embedder = embedder

        def __call__(self, input: list[str]) -> list[np.ndarray]:
            return list(self._embedder.embed_documents(list(input)))

        def embed_query(self, input: list[str]) -> list[np.ndarray]:
            return list(self._embedder.embed_queries(list(input)))

        @staticmethod
        def name() -> str:
            return "pal-studio"

        def get_config(self) -> dict[str, Any]:
            return {"embedder": embedder.name}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> Any:
            # by registry name, never by a stored absolute path, so a moved venv still opens old collections
            name = config.get("embedder", "hash")
            return _chroma_embedding_function(LazyEmbedder(name, functools.partial(load_embedder, name)))

    return _PalEmbedding()


CHROMA_FILE = "chroma.sqlite3"  # the SQLite file a persistent Chroma keeps its records, metadata and log in


def open_chroma(path: Path) -> Any:
    """A ChromaDB ``PersistentClient`` on ``path`` with telemetry off (one per folder: the workspace keeps it); a new
    folder's SQLite file is made in WAL mode first (:func:`new_file_in_wal`)."""
    import chromadb
    from chromadb.config import Settings

    new_file_in_wal(Path(path) / CHROMA_FILE)
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def new_file_in_wal(db: Path) -> bool:
    """Make Chroma's SQLite file, before Chroma first opens it, in WAL mode (kept in the file, so Chroma's own
    connections, in this process and others, write that way); whether it was made. A file that exists is left as it
    is: switching one that a Chroma connection pool has open breaks the next process's reads (SQLite I/O error 522
    in Chroma's compaction).

    In Chroma's default rollback journal each write commits with a handful of fsyncs (journal, file, folder):
    15–45 ms an upsert on a busy disk, with Python's GIL held by Chroma's bindings all the while, so every other
    thread of the process stops too. In WAL mode a commit syncs the log once: the same records, as durable,
    several times sooner."""
    import sqlite3

    if db.exists():
        return False
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(db))
    try:
        mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
    finally:
        conn.close()
    if mode.lower() != "wal":
        log.warning("new Chroma file %s: WAL refused (journal mode %s); its writes sync more often", db, mode)
    return True


class ChromaStore:
    """One embedder's collections in a ChromaDB client; one collection per namespace."""

    def __init__(self, embedder: Embedder, client: Any):
        self.embedder = embedder
        self._client = client
        self._ef = _chroma_embedding_function(embedder)
        self._collections: dict[str, Any] = {}
        self._mirrors: dict[str, MetadataMirror | None] = {}  # each queried collection's ids and metadata
        self._checked: dict[str, float] = {}  # when each mirror's size was last checked
        self.mirror_check_s = MIRROR_CHECK_S
        self._lock = threading.Lock()

    def _collection(self, ns: Namespace) -> Any:
        name = ns.collection_name
        with self._lock:
            if name not in self._collections:
                self._collections[name] = self._client.get_or_create_collection(
                    name, embedding_function=self._ef, configuration={"hnsw": {"space": "cosine"}},
                    metadata={**ns.as_metadata(), "embedder": self.embedder.name},
                )
                keep_sparse_targets(self._collections[name])
            return self._collections[name]

    def upsert(self, ns: Namespace, ids: list[str], texts: list[str], metadatas: list[dict[str, Any]] | None = None) -> None:
        if not ids:
            return
        self.upsert_vectors(ns, ids, texts, self.embedder.embed_documents(texts), metadatas)

    def upsert_vectors(self, ns: Namespace, ids: list[str], texts: list[str], vectors: np.ndarray,
                       metadatas: list[dict[str, Any]] | None = None) -> None:
        """Upsert with vectors computed elsewhere (batch pipelines, benchmarks)."""
        metas = [_clean_metadata(m) for m in (metadatas or [{} for _ in ids])]
        col = self._collection(ns)
        for i in range(0, len(ids), 4096):  # Chroma caps a batch
            col.upsert(ids=ids[i:i + 4096], documents=texts[i:i + 4096], embeddings=vectors[i:i + 4096].tolist(),
                       metadatas=metas[i:i + 4096])
        if (mirror := self._mirrors.get(ns.collection_name)) is not None:
            mirror.merge(ids, metas)

    def query(self, ns: Namespace, text: str, k: int = 3, where: dict[str, Any] | None = None) -> list[Hit]:
        vector = self.embedder.embed_queries([text])[0]
        return self.query_vector(ns, vector, k, where)

    def query_vector(self, ns: Namespace, vector: np.ndarray, k: int = 3, where: dict[str, Any] | None = None) -> list[Hit]:
        col = self._collection(ns)
        ids = self._selected(ns, col, where) if where else None
        if ids is not None and not ids:
            return []
        # Chroma returns fewer hits when fewer exist; a filter this process can read is sent as the ids it selects
        res = col.query(query_embeddings=[np.asarray(vector).tolist()], ids=ids,
                        n_results=k if ids is None else min(k, len(ids)), where=where if ids is None and where else None,
                        include=["documents", "distances", "metadatas"])
        return [Hit(id=i, text=d or "", score=1.0 - float(dist), metadata=dict(m or {}))
                for i, d, dist, m in zip(res["ids"][0], res["documents"][0], res["distances"][0], res["metadatas"][0])]

    def _selected(self, ns: Namespace, col: Any, where: dict[str, Any]) -> list[str] | None:
        """The ids of ``col`` that ``where`` selects, from this process's mirror of its metadata
        (:mod:`backends.chroma_filter`: Chroma's own filter costs more the more collections the file holds); None
        when Chroma is to filter (a filter the mirror cannot read, too many ids, a collection too large to mirror).
        Writes through this store keep the mirror in step; every ``mirror_check_s`` seconds its size is compared
        with the collection's (a ``count()``: ~20 ms at 100k vectors, so not at every query) and the mirror read
        again when another process added or deleted vectors. A metadata change made by another process alone is
        not seen until then."""
        name, now = ns.collection_name, time.monotonic()
        with self._lock:
            mirror, checked = self._mirrors.get(name), self._checked.get(name)
        if checked is None or now - checked >= self.mirror_check_s:
            size = int(col.count())
            if size > MIRRORED_VECTORS:
                mirror = None
            elif mirror is None or len(mirror) != size:
                mirror = MetadataMirror.load(col)
            with self._lock:
                self._mirrors[name], self._checked[name] = mirror, now
        if mirror is None:
            return None
        try:
            ids = mirror.select(where)
        except Unsupported as e:
            log.debug("collection %s: Chroma filters %s itself (%s)", name, where, e)
            return None
        return ids if len(ids) <= MIRRORED_IDS else None

    def delete(self, ns: Namespace, ids: list[str] | None = None, where: dict[str, Any] | None = None) -> None:
        col = self._collection(ns)
        if ids:
            col.delete(ids=ids)
        elif where:
            col.delete(where=where)
        with self._lock:  # deleted by a filter: the mirror is read again on the next filtered query
            mirror = self._mirrors.get(ns.collection_name)
            if not ids:
                self._mirrors.pop(ns.collection_name, None)
                self._checked.pop(ns.collection_name, None)
        if mirror is not None and ids:
            mirror.remove(ids)

    def count(self, ns: Namespace) -> int:
        return int(self._collection(ns).count())

    def update_metadata(self, ns: Namespace, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
        if ids:
            metas = [_clean_metadata(m) for m in metadatas]
            self._collection(ns).update(ids=ids, metadatas=metas)
            if (mirror := self._mirrors.get(ns.collection_name)) is not None:
                mirror.merge(ids, metas, add=False)


class BruteForceStore:
    """Exact cosine search in memory (same interface as :class:`ChromaStore`): tests, and read-only workspaces
    (a presented bundle's builds, which must write nothing to disk)."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self._data: dict[str, dict[str, tuple[str, np.ndarray, dict[str, Any]]]] = {}

    def upsert(self, ns: Namespace, ids: list[str], texts: list[str], metadatas: list[dict[str, Any]] | None = None) -> None:
        vectors = self.embedder.embed_documents(texts)
        bucket = self._data.setdefault(ns.collection_name, {})
        for i, (id_, text) in enumerate(zip(ids, texts)):
            bucket[id_] = (text, vectors[i], dict((metadatas or [{}] * len(ids))[i]))

    def query(self, ns: Namespace, text: str, k: int = 3, where: dict[str, Any] | None = None) -> list[Hit]:
        bucket = self._data.get(ns.collection_name, {})
        items = [(i, t, v, m) for i, (t, v, m) in bucket.items() if not where or _matches(m, where)]
        if not items:
            return []
        q = self.embedder.embed_queries([text])[0]
        scored = sorted(((float(v @ q), i, t, m) for i, t, v, m in items), key=lambda x: -x[0])[:k]
        return [Hit(id=i, text=t, score=s, metadata=m) for s, i, t, m in scored]

    def delete(self, ns: Namespace, ids: list[str] | None = None, where: dict[str, Any] | None = None) -> None:
        bucket = self._data.get(ns.collection_name, {})
        for id_ in list(bucket):
            meta = bucket[id_][2]
            if (ids and id_ in ids) or (where and all(meta.get(k) == v for k, v in where.items())):
                del bucket[id_]

    def count(self, ns: Namespace) -> int:
        return len(self._data.get(ns.collection_name, {}))

    def update_metadata(self, ns: Namespace, ids: list[str], metadatas: list[dict[str, Any]]) -> None:
        bucket = self._data.get(ns.collection_name, {})
        for id_, meta in zip(ids, metadatas):
            if id_ in bucket:
                text, vec, old = bucket[id_]
                bucket[id_] = (text, vec, {**old, **meta})


_OPS = {"$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b, "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b, "$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b,
        "$in": lambda a, b: a in b, "$nin": lambda a, b: a not in b}


def _matches(meta: dict[str, Any], where: dict[str, Any]) -> bool:
    """The subset of Chroma's ``where`` language the app uses: $and/$or and comparison operators."""
    for key, cond in where.items():
        if key == "$and":
            if not all(_matches(meta, c) for c in cond):
                return False
        elif key == "$or":
            if not any(_matches(meta, c) for c in cond):
                return False
        elif isinstance(cond, dict):
            if key not in meta or not all(_OPS[op](meta[key], val) for op, val in cond.items()):
                return False
        elif meta.get(key) != cond:
            return False
    return True
