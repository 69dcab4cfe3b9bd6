"""The run store's schema: one ordered list of migrations, applied once each, recorded in ``schema_version``.

Add a migration by appending to :data:`MIGRATIONS`; never edit one that has shipped.
"""

from __future__ import annotations

import sqlite3

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "llm calls",
        """
        CREATE TABLE llm_calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            session_id TEXT,
            run_id TEXT,
            role TEXT NOT NULL,
            provider TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            model TEXT NOT NULL,
            prompt_name TEXT,
            prompt_version TEXT,
            tokens_in INTEGER NOT NULL DEFAULT 0,
            tokens_out INTEGER NOT NULL DEFAULT 0,
            latency_ms REAL NOT NULL DEFAULT 0,
            cache_hit INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 1,
            structured_ok INTEGER,
            error TEXT
        );
        CREATE INDEX llm_calls_session ON llm_calls(session_id);
        CREATE INDEX llm_calls_run ON llm_calls(run_id);
        """,
    ),
]


def current_version(conn: sqlite3.Connection) -> int:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)")
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every pending migration inside the caller's transaction; returns the new version."""
    version = current_version(conn)
    for number, name, sql in MIGRATIONS:
        if number > version:
            for statement in filter(str.strip, sql.split(";")):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version VALUES (?, ?, strftime('%s','now'))", (number, name))
            version = number
    return version
