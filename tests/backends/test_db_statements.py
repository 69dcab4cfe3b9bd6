"""What a read and a write cost in statements: reads in a row turn the connection read-only once, a write turns
it back, and neither loses its guarantees (a read cannot write; a write inside a read fails fast)."""

from __future__ import annotations

import sqlite3

import pytest

from backends.store.db import Database


def _traced(db: Database) -> list[str]:
    seen: list[str] = []
    db.connection().set_trace_callback(seen.append)
    return seen


def test_reads_in_a_row_turn_the_connection_read_only_once_and_a_write_turns_it_back(tmp_path):
    db = Database(tmp_path / "a.sqlite")
    with db.write() as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    seen = _traced(db)
    for _ in range(5):
        with db.read() as conn:
            conn.execute("SELECT COUNT(*) FROM t").fetchone()
    assert seen.count("PRAGMA query_only=ON") == 1 and len(seen) == 1 + 5 * 3  # BEGIN, SELECT, COMMIT each
    with db.read() as conn, pytest.raises(sqlite3.OperationalError):
        conn.execute("INSERT INTO t VALUES (1)")
    with db.write() as conn:
        conn.execute("INSERT INTO t VALUES (2)")
    assert seen.count("PRAGMA query_only=OFF") == 1
    with db.write() as conn:  # writes in a row set nothing either
        conn.execute("INSERT INTO t VALUES (3)")
    assert seen.count("PRAGMA query_only=OFF") == 1
    with db.read() as conn:
        assert [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")] == [2, 3]
        with pytest.raises(RuntimeError, match="nested transaction"), db.write():
            pass


def test_a_reopened_connection_starts_writable_again(tmp_path):
    path = tmp_path / "sub" / "a.sqlite"
    db = Database(path)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    with db.read() as conn:
        conn.execute("SELECT 1").fetchone()
    for p in path.parent.iterdir():
        p.unlink()
    with db.write() as conn:  # a new connection: not read-only, whatever the old one was
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
    with db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
