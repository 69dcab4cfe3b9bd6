"""The Ray executor on a local Ray instance: one small experiment gives exactly the records the thread executor
gives — every utterance, judgment sample and task result — with no shared database (units ship their records)."""

from __future__ import annotations

import logging
import shutil
import sqlite3

import pytest

from backends.paths import StatePaths
from tests.protocol.test_experiment import FILE, records

ray = pytest.importorskip("ray", reason="ray is an optional extra (make ray)")


@pytest.fixture
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow(seconds=14)
def test_ray_and_threads_give_identical_records(tmp_path, local_ray):
    from studio.remote import ray_executor
    from testkit.run_experiment import run

    assert run(tmp_path / "threads", FILE).startswith("[40/40]")
    line = run(tmp_path / "ray", FILE, executor=ray_executor)
    assert line.startswith("[40/40]"), line
    a, b = records(tmp_path / "threads"), records(tmp_path / "ray")
    assert a == b and len(a["turns"]) > 0 and len(a["judgments"]) == 8 and len(a["results"]) == 24
    calls = "SELECT COUNT(*), SUM(tokens_in), SUM(tokens_out) FROM llm_calls"
    import sqlite3

    with sqlite3.connect(StatePaths(tmp_path / "threads").runs_db) as t, sqlite3.connect(StatePaths(tmp_path / "ray").runs_db) as r:
        assert t.execute(calls).fetchone() == r.execute(calls).fetchone()  # every call accounted on the driver


def test_a_workers_units_copy_its_migrated_template_and_share_its_embedding_cache_and_limits(tmp_path, caplog):
    """A worker process makes one migrated template home: each unit's scratch run store is a copy of it (no
    migration to apply), the embedders' cache is the template's — it outlives every unit's home, where a cache in
    the first unit's home failed every read and write after that home was removed — and the endpoint limits are
    one per process, shared by its units."""
    from studio import remote
    from studio.workspace import Workspace
    from testkit.workspace import make_workspace

    base = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    remote.warm_worker(base.config, base._providers)  # a unit's home is made, used and removed
    caplog.set_level(logging.ERROR)
    for text in ("first unit", "second unit"):
        home = remote._scratch_home(base.config, base._providers)
        with sqlite3.connect(StatePaths(home).runs_db) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"memory_items", "sim_turns", "llm_calls"} <= tables  # migrated before the unit opens it
        ws = Workspace(home, base.config, providers=base._providers, takes_log=False)
        ws._shared = remote._worker_shared()
        assert ws.embed_cache().path.is_relative_to(remote._PROCESS["home"])
        ws.embedder().embed_documents([text])
        assert remote._worker_limiters(base.config) is remote._worker_limiters(ws.config)
        ws.close()
        remote._close_stores(ws)
        shutil.rmtree(home)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def _index_contents(ws) -> dict:
    """Every vector in ``ws``'s Chroma (one collection per build and layer): (collection, id) → (metadata,
    document, vector)."""
    client, out = ws._shared["chroma"], {}
    for collection in client.list_collections():
        got = client.get_collection(collection.name).get(include=["metadatas", "documents", "embeddings"])
        for vid, meta, doc, vector in zip(got["ids"], got["metadatas"], got["documents"], got["embeddings"]):
            out[(collection.name, vid)] = (meta, doc, [round(float(x), 6) for x in vector])
    return out


@pytest.mark.parametrize("method", ["recursum", "gold"])
def test_items_reindexed_from_shipped_rows_give_the_index_the_build_made_where_it_ran(tmp_path, method):
    """The driver re-indexes the memory items a unit sent back: its index then holds the very vectors, documents
    and validity the build's own index holds where it ran — closed versions included (recursum replaces its
    summaries session by session), and only the layers the method's retrieval searches (gold, as H²Memory: its
    situations and topic outlines)."""
    import threading

    from studio.records import apply_rows, export_rows
    from studio.remote import reindex
    from testkit.latency_server import LatencyServer
    from testkit.release import make_release
    from testkit.workspace import make_workspace

    server = LatencyServer(latency=0.0)
    threading.Thread(target=server.httpd.serve_forever, daemon=True).start()
    try:
        env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url,
               "PAL_DEFAULT_MODEL": "m", "PAL_EMBEDDER": "hash"}
        dataset = make_release(tmp_path / "ds", users=1, sessions=3, logs_per_session=4, turns=4, query_sessions=1)
        here = make_workspace(tmp_path / "worker", env=env, secrets={"cache": False})
        ds = here.dataset(dataset)
        builder = here.open_builder(ds, sorted(ds.users)[0], method, method_config={})
        builder.run()
        builder.ensure_index()  # gold embeds on first retrieval
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
    sel = {t: ("build_id=?", [builder.build_id]) for t in ("memory_builds", "memory_build_stages", "memory_items")}
    rows = export_rows(here.db, sel)
    assert any(r["valid_to"] is not None for r in rows["memory_items"])  # versions closed by later sessions
    driver = make_workspace(tmp_path / "driver", env=env, secrets={"cache": False})
    apply_rows(driver.db, rows)
    reindex(driver, rows)
    made, reindexed = _index_contents(here), _index_contents(driver)
    assert made and reindexed == made


def test_a_worker_keeps_its_folders_under_one_root_and_removes_those_of_ended_workers(tmp_path, monkeypatch):
    """A worker process's template home, vector index and units' homes lie under one folder named by its pid; an
    actor ended by a signal cannot remove its own, so the next worker process on the machine removes the folders
    of processes that no longer run (and leaves those of running ones)."""
    import os
    import subprocess
    import tempfile

    from studio import remote
    from testkit.workspace import make_workspace

    ended = subprocess.Popen(["true"])
    ended.wait()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    gone = tmp_path / "tmp" / f"pal-worker-{ended.pid}-old"
    running = tmp_path / "tmp" / f"pal-worker-{os.getppid()}-old"
    for folder in (gone, running):
        (folder / "chroma-x").mkdir(parents=True)
    monkeypatch.setattr(remote, "_PROCESS", {})
    monkeypatch.setattr(remote, "_WORKER_SHARED", {})
    base = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    home = remote._scratch_home(base.config, base._providers)
    root = remote._PROCESS["root"]
    assert not gone.exists() and running.exists()
    assert root.name.startswith(f"pal-worker-{os.getpid()}-") and home.parent == root
    assert remote._PROCESS["home"].parent == root and remote._worker_shared()["chroma"] is not None
    assert {p.name.split("-")[0] for p in root.iterdir()} == {"template", "unit", "chroma"}
