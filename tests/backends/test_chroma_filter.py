"""Filtered Chroma queries worked out in this process (backends.chroma_filter) select what Chroma's own filter does,
stay right after writes made through the store or by another client, and cost the same however many collections
the file holds."""

import time

import numpy as np
import pytest

from backends.chroma_filter import MetadataMirror, Unsupported
from backends.embeddings import HashEmbedder
from backends.vectorstore import ChromaStore, Namespace, open_chroma

NS = Namespace("demo", "1000", "h2memory-1000-abc", "situation")
WORDS = "sleep night shift iron tablets brother university film photography walk budget dinner".split()

WHERES = [
    {"$and": [{"valid_from": {"$lte": 3}}, {"valid_to": {"$gt": 3}}]},
    {"$and": [{"valid_from": {"$lte": 5}}, {"valid_to": {"$gt": 5}}, {"session_index": 2}]},
    {"$and": [{"valid_from": {"$lte": 6}}, {"valid_to": {"$gt": 6}}, {"session_index": {"$lt": 4}}]},
    {"$and": [{"session_index": {"$gte": 2}}, {"session_index": {"$lt": 5}}]},
    {"$or": [{"session_index": 1}, {"kind": "b"}]},
    {"kind": {"$in": ["a", "c"]}},
    {"session_index": {"$nin": [0, 1, 2]}},
    {"extra": {"$ne": 1}},  # a vector without the key matches $ne, as in Chroma
    {"extra": 1},
    {"item_id": "i7"},
]


def _fill(store: ChromaStore, ns: Namespace, n: int = 60, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    ids = [f"i{j}@{j % 8}" for j in range(n)]
    texts = [" ".join(rng.choice(WORDS, 4)) for _ in range(n)]
    metas = [{"item_id": f"i{j}", "valid_from": j % 8, "valid_to": 10**9 if j % 3 else j % 8 + 2,
              "session_index": j % 8, "kind": "abc"[j % 3], **({"extra": j % 2} if j % 5 == 0 else {})}
             for j in range(n)]
    store.upsert(ns, ids, texts, metas)


def _chroma_ids(store: ChromaStore, ns: Namespace, query: str, k: int, where: dict) -> list[str]:
    """What Chroma's own filter answers (the reference)."""
    col = store._collection(ns)
    res = col.query(query_embeddings=[store.embedder.embed_queries([query])[0].tolist()], n_results=k, where=where)
    return res["ids"][0]


@pytest.fixture
def store(tmp_path):
    return ChromaStore(HashEmbedder(), open_chroma(tmp_path / "chroma"))


def test_filtered_queries_select_what_chromas_filter_selects(store):
    _fill(store, NS)
    for where in WHERES:
        for query in ("sleep after the night shift", "film photography walk"):
            assert [h.id for h in store.query(NS, query, k=5, where=where)] == \
                _chroma_ids(store, NS, query, 5, where), where


def test_the_mirror_follows_writes_through_the_store_and_by_another_client(store, tmp_path):
    _fill(store, NS)
    where = {"$and": [{"valid_from": {"$lte": 3}}, {"valid_to": {"$gt": 3}}]}
    store.query(NS, "sleep", k=3, where=where)  # the mirror is read
    store.update_metadata(NS, ["i1@1", "i2@2"], [{"valid_to": 3}, {"valid_to": 3}])  # closed at stage 3
    store.delete(NS, ids=["i9@1"])
    store.upsert(NS, ["new@3"], ["sleep sleep night shift"], [{"item_id": "new", "valid_from": 3, "valid_to": 10**9}])
    store.delete(NS, where={"kind": "c"})
    store.mirror_check_s = 0.0  # the mirror's size is checked at every query (else once a second)
    other = open_chroma(tmp_path / "chroma").get_collection(NS.collection_name)  # as another process would write
    other.upsert(ids=["far@0"], documents=["x"], embeddings=[store.embedder.embed_documents(["sleep night"])[0].tolist()],
                 metadatas=[{"item_id": "far", "valid_from": 0, "valid_to": 10**9}])
    for query in ("sleep night shift", "iron tablets", "brother"):
        got = [h.id for h in store.query(NS, query, k=8, where=where)]
        assert got == _chroma_ids(store, NS, query, 8, where)
    assert {"new@3", "far@0"} <= {h.id for h in store.query(NS, "sleep night", k=60, where=where)}
    assert not {"i1@1", "i2@2", "i9@1"} & {h.id for h in store.query(NS, "sleep night", k=60, where=where)}


def test_filters_the_mirror_cannot_read_are_left_to_chroma(store):
    _fill(store, NS)
    mirror = MetadataMirror([], [])
    for where in ({"score": {"$lt": 0.5}}, {"flag": True}, {"$not": {"a": 1}}, {"kind": {"$lt": "b"}},
                  {"session_index": {"$gte": 2, "$lt": 5}}, {"$and": [{"kind": "a"}]}):
        with pytest.raises(Unsupported):
            mirror.select(where)
    assert store.query(NS, "sleep", k=3, where={"weight": {"$lt": 0.5}}) == []  # Chroma's answer: no such key
    assert store.query(NS, "sleep", k=3, where={"valid_from": 99}) == []


@pytest.mark.slow(seconds=20)
def test_a_filtered_query_costs_the_same_however_many_collections_the_file_holds(store):
    """Chroma's own range filter reads every collection's metadata: forty users' collections made each query several
    times dearer than one user's. Through the mirror, the CPU of a query does not grow with the collections."""
    where = {"$and": [{"valid_from": {"$lte": 5}}, {"valid_to": {"$gt": 5}}]}

    def cpu_per_query(ns: Namespace) -> float:
        store.query(ns, "sleep", k=5, where=where)  # the mirror is read once
        t0 = time.thread_time()
        for _ in range(20):
            store.query(ns, "sleep night shift", k=5, where=where)
        return (time.thread_time() - t0) / 20

    _fill(store, NS, 200)
    one = min(cpu_per_query(NS) for _ in range(3))
    for u in range(30):
        _fill(store, Namespace("demo", f"u{u}", f"b{u}", "situation"), 200, seed=u + 1)
    many = min(cpu_per_query(NS) for _ in range(3))
    assert many < 2.5 * one + 0.002, (one, many)


def test_a_collection_too_large_to_mirror_is_filtered_by_chroma(store, monkeypatch):
    import backends.vectorstore as vectorstore

    monkeypatch.setattr(vectorstore, "MIRRORED_VECTORS", 10)
    _fill(store, NS)
    where = WHERES[0]
    assert [h.id for h in store.query(NS, "sleep", k=5, where=where)] == _chroma_ids(store, NS, "sleep", 5, where)
    assert store._mirrors[NS.collection_name] is None


def test_a_kept_selection_goes_with_the_next_write():
    mirror = MetadataMirror(["a", "b", "c"], [{"valid_from": 0, "valid_to": 9}, {"valid_from": 2, "valid_to": 9}, None])
    where = {"$and": [{"valid_from": {"$lte": 1}}, {"valid_to": {"$gt": 1}}]}
    first = mirror.select(where)
    assert first == ["a"]
    first.append("x")  # a caller's list is its own
    assert mirror.select(where) == ["a"]
    assert mirror.select({"$and": [{"valid_to": {"$gt": 1}}, {"valid_from": {"$lte": 1}}]}) == ["a"]
    mirror.merge(["b"], [{"valid_from": 1}], add=False)
    assert mirror.select(where) == ["a", "b"]
    mirror.merge(["c"], [{"valid_from": 0, "valid_to": 5}])
    assert mirror.select(where) == ["a", "b", "c"]
    mirror.remove(["a"])
    assert mirror.select(where) == ["b", "c"]
    with pytest.raises(Unsupported):  # a filter the mirror cannot read is never kept as read
        mirror.select({"valid_from": {"$lte": 1.5}})


def test_a_collection_reads_its_schema_once_per_stored_schema(store, monkeypatch):
    from chromadb.api.types import Schema

    reads: list[int] = []
    original = Schema.deserialize_from_json.__func__  # type: ignore[attr-defined]  # a classmethod's function

    def counted(cls, data):
        reads.append(1)
        return original(cls, data)

    monkeypatch.setattr(Schema, "deserialize_from_json", classmethod(counted))
    col = store._collection(NS)
    fresh = type(col)._get_sparse_embedding_targets(col)  # what Chroma works out itself
    reads.clear()
    for n in range(3):
        store.upsert(NS, [f"v{n}"], [f"text {n}"], [{"valid_from": n}])
    assert col.count() == 3 and reads == [1]
    assert col._get_sparse_embedding_targets() == fresh
    col._model["serialized_schema"] = dict(col._model.serialized_schema)  # a new stored schema (a configuration change)
    store.upsert(NS, ["v9"], ["text 9"], [{"valid_from": 9}])
    assert reads == [1, 1]
