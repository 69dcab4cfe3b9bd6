"""Per-thread SQLite connections: reused, transactional, safe when a file disappears or a thread is new."""

from __future__ import annotations

import threading

import pytest

from backends.store import db


def _setup(path):
    with db.connect(path) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")


def test_connection_is_reused_within_a_thread_and_not_across(tmp_path):
    path = tmp_path / "a.sqlite"
    _setup(path)
    with db.connect(path) as c1:
        pass
    with db.connect(path) as c2:
        pass
    assert c1 is c2
    other = []

    def worker():
        with db.connect(path) as c:
            other.append(c)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert other and other[0] is not c1


def test_error_rolls_back_and_leaves_no_open_transaction(tmp_path):
    path = tmp_path / "a.sqlite"
    _setup(path)
    with pytest.raises(RuntimeError), db.connect(path) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("boom")
    with db.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
        conn.execute("INSERT INTO t VALUES (2)")
    with db.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT x FROM t")] == [2]


def test_a_deleted_file_is_reopened_not_written_through_a_stale_connection(tmp_path):
    path = tmp_path / "sub" / "a.sqlite"
    _setup(path)
    for p in path.parent.iterdir():
        p.unlink()
    _setup(path)
    with db.connect(path) as conn:
        conn.execute("INSERT INTO t VALUES (3)")
    assert path.exists()


def test_only_a_bounded_number_of_files_stay_open_per_thread(tmp_path):
    for i in range(db.MAX_PER_THREAD + 5):
        _setup(tmp_path / f"{i}.sqlite")
    assert len(db._LOCAL.pool) <= db.MAX_PER_THREAD


def test_nested_use_of_one_file_fails_fast_instead_of_waiting_for_the_lock(tmp_path):
    path = tmp_path / "a.sqlite"
    _setup(path)
    with db.connect(path), pytest.raises(Exception, match="transaction"):
        with db.connect(path):
            pass


def test_a_slow_reader_does_not_hold_up_a_writer_and_cannot_write(tmp_path):
    path = tmp_path / "a.sqlite"
    _setup(path)
    wrote = threading.Event()

    def writer():
        with db.connect(path) as conn:
            conn.execute("INSERT INTO t VALUES (1)")
        wrote.set()

    with db.reading(path) as conn:
        before = conn.execute("SELECT COUNT(*) FROM t").fetchone()[0]
        t = threading.Thread(target=writer)
        t.start()
        assert wrote.wait(5), "the writer waited for the reader"
        assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == before  # one snapshot throughout
        with pytest.raises(db.sqlite3.OperationalError):
            conn.execute("INSERT INTO t VALUES (2)")
    t.join()
    with db.reading(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == before + 1
    with db.connect(path) as conn:  # the connection writes again after a read
        conn.execute("INSERT INTO t VALUES (3)")
