import sqlite3
import subprocess
import sys

import pytest

from backends.store.capabilities import CapabilityStore
from backends.store.db import Database
from backends.store.runstore import CallRecord, RunStore
from backends.store.schema import current_version, migrate_database
from studio.workspace import MIGRATIONS
from tests.conftest import ROOT


def _store(path):
    db = Database(path)
    migrate_database(db, MIGRATIONS)
    return RunStore(db, CapabilityStore(db))


def test_migrations_apply_once_and_wal_is_on(tmp_path):
    path = tmp_path / "runs.sqlite"
    db = Database(path)
    assert migrate_database(db, MIGRATIONS) == sorted(m[0] for m in MIGRATIONS)
    assert migrate_database(Database(path), MIGRATIONS) == []  # re-running migrations is a no-op
    conn = sqlite3.connect(path)
    assert current_version(conn) == max(m[0] for m in MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == len(MIGRATIONS)


def test_a_migration_numbered_below_the_applied_ones_still_applies(tmp_path):
    db = Database(tmp_path / "runs.sqlite")
    migrate_database(db, [(1, "a", "CREATE TABLE a (x)"), (30, "c", "CREATE TABLE c (x)")])
    assert migrate_database(db, [(1, "a", "CREATE TABLE a (x)"), (12, "b", "CREATE TABLE b (x)"),
                                 (30, "c", "CREATE TABLE c (x)")]) == [12]
    with db.read() as conn:
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= {"a", "b", "c"}


def test_two_migrations_with_one_number_are_refused(tmp_path):
    with pytest.raises(ValueError, match="numbered 7"):
        migrate_database(Database(tmp_path / "r.sqlite"), [(7, "x", "CREATE TABLE x (a)"), (7, "y", "CREATE TABLE y (a)")])


def test_parallel_processes_record_every_call(tmp_path):
    path = tmp_path / "runs.sqlite"
    _store(path)
    code = ("import sys; sys.path.insert(0, sys.argv[2])\n"
            "from pathlib import Path\n"
            "from backends.store.db import Database\n"
            "from backends.store.runstore import CallRecord, RunStore\n"
            "from backends.store.capabilities import CapabilityStore\n"
            "db = Database(Path(sys.argv[1])); s = RunStore(db, CapabilityStore(db))\n"
            "for i in range(50): s.record_call(CallRecord(role='judge', provider='fake', endpoint='e', model='m', tokens_in=1))\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(ROOT)]) for _ in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    totals = _store(path).totals()
    assert totals.calls == 200 and totals.tokens_in == 200


def test_totals_per_session_and_model(tmp_path):
    store = _store(tmp_path / "r.sqlite")
    store.record_call(CallRecord(session_id="a", role="judge", provider="p", endpoint="e", model="m1", tokens_in=10, tokens_out=2))
    store.record_call(CallRecord(session_id="b", role="judge", provider="p", endpoint="e", model="m2", tokens_in=5, tokens_out=1,
                                 error="boom"))
    assert store.totals("a").by_model == {"m1": (10, 2)}
    assert store.totals().calls == 2 and store.totals().errors == 1
