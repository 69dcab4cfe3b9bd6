"""Per-thread SQLite connections: reused, transactional, safe when a file disappears or a thread is new;
reads that never take the write lock."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from backends.store.db import Database


def _setup(path) -> Database:
    db = Database(path)
    with db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    return db


def test_connection_is_reused_within_a_thread_and_not_across(tmp_path):
    db = _setup(tmp_path / "a.sqlite")
    with db.write() as c1:
        pass
    with db.read() as c2:
        pass
    assert c1 is c2
    other = []

    def worker():
        with db.write() as c:
            other.append(c)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert other and other[0] is not c1


def test_error_rolls_back_and_leaves_no_open_transaction(tmp_path):
    db = _setup(tmp_path / "a.sqlite")
    with pytest.raises(RuntimeError), db.write() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("boom")
    with db.write() as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
        conn.execute("INSERT INTO t VALUES (2)")
    with db.read() as conn:
        assert [r[0] for r in conn.execute("SELECT x FROM t")] == [2]


def test_a_deleted_file_is_reopened_not_written_through_a_stale_connection(tmp_path):
    path = tmp_path / "sub" / "a.sqlite"
    db = _setup(path)
    for p in path.parent.iterdir():
        p.unlink()
    with db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
        conn.execute("INSERT INTO t VALUES (3)")
    assert path.exists()
    with db.read() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_each_database_keeps_one_connection_per_thread(tmp_path):
    dbs = [_setup(tmp_path / f"{i}.sqlite") for i in range(5)]
    conns = set()
    for db in dbs:
        with db.read() as c1:
            conns.add(id(c1))
        with db.write() as c2:
            conns.add(id(c2))
    assert len(conns) == len(dbs)


def test_nested_use_of_one_file_fails_fast_instead_of_waiting_for_the_lock(tmp_path):
    db = _setup(tmp_path / "a.sqlite")
    with db.write(), pytest.raises(Exception, match="transaction"):
        with db.write():
            pass


def test_a_slow_reader_does_not_block_a_writer(tmp_path):
    db = _setup(tmp_path / "a.sqlite")
    reading, release = threading.Event(), threading.Event()

    def reader():
        with db.read() as conn:
            conn.execute("SELECT count(*) FROM t").fetchone()
            reading.set()
            release.wait(10)

    t = threading.Thread(target=reader)
    t.start()
    assert reading.wait(10)
    started = time.perf_counter()
    with db.write() as conn:
        conn.execute("INSERT INTO t VALUES (9)")
    waited = time.perf_counter() - started
    release.set()
    t.join()
    assert waited < 1.0
def test_a_slow_reader_does_not_hold_up_a_writer_and_cannot_write(tmp_path):
    dbase = _setup(tmp_path / "a.sqlite")
    wrote = threading.Event()

    def writer():
        with dbase.write() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
        wrote.set()

    with dbase.read() as conn:
        before = conn.execute("SELECT COUNT(*) FROM t").fetchone()[0]
        t = threading.Thread(target=writer)
        t.start()
        assert wrote.wait(5), "the writer waited for the reader"
        assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == before  # one snapshot throughout
        with pytest.raises(sqlite3.OperationalError):
            conn.execute("INSERT INTO t VALUES (2)")
    t.join()
    with dbase.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == before + 1
    with dbase.write() as conn:  # the connection writes again after a read
        conn.execute("INSERT INTO t VALUES (3)")
