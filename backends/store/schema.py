"""Schema migrations: numbered, applied once each, recorded in ``schema_version``.

Each domain declares its own tables as a list of :data:`Migration` next to its store (``memory/schema.py``,
``sim/schema.py``, …); the composition root (:mod:`studio.workspace`) applies all of them to the run
store. Numbers are global and never reused; a migration that has shipped is never edited. Migrations
are applied in number order, and any number not yet applied is applied — so a migration merged with a
lower number than one already applied still runs (each migration only adds its own tables or columns).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from backends.store.db import Database

Migration = tuple[int, str, str]  # (number, name, SQL statements separated by ';')

MIGRATIONS: list[Migration] = [
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
    (
        11,
        "leases: one holder of a resource (a simulation run's driver) until it expires",
        """
        CREATE TABLE leases (
            resource TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            acquired_at REAL NOT NULL,
            expires_at REAL NOT NULL
        )
        """,
    ),
    (
        12,
        'audit log: who did what to which target, when',
        """
        CREATE TABLE audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX audit_log_ts ON audit_log(ts)
        """,
    ),
    (
        28,
        "llm calls: prompt tokens the endpoint served from its prompt cache and computed, where it says",
        """
        ALTER TABLE llm_calls ADD COLUMN tokens_cached INTEGER;
        ALTER TABLE llm_calls ADD COLUMN tokens_processed INTEGER
        """,
    ),
    (
        40,
        "what each endpoint + model can do (structured modes, window, streaming, seed, reasoning)",
        """
        CREATE TABLE llm_capabilities (
            endpoint TEXT NOT NULL,
            model TEXT NOT NULL,
            structured_mode TEXT,
            structured_note TEXT,
            modes TEXT NOT NULL DEFAULT '{}',
            context_window INTEGER,
            window_source TEXT,
            streaming INTEGER,
            seed_honoured INTEGER,
            emits_reasoning INTEGER,
            checked_at REAL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (endpoint, model)
        )
        """,
    ),
    (
        41,
        "llm calls: reasoning kept apart, token counters, window fitting, structured mode",
        """
        ALTER TABLE llm_calls ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE llm_calls ADD COLUMN tokens_counter TEXT;
        ALTER TABLE llm_calls ADD COLUMN reasoning_counter TEXT;
        ALTER TABLE llm_calls ADD COLUMN prompt_tokens_est INTEGER;
        ALTER TABLE llm_calls ADD COLUMN est_counter TEXT;
        ALTER TABLE llm_calls ADD COLUMN max_tokens INTEGER;
        ALTER TABLE llm_calls ADD COLUMN context_window INTEGER;
        ALTER TABLE llm_calls ADD COLUMN structured_mode TEXT;
        ALTER TABLE llm_calls ADD COLUMN fit_note TEXT;
        CREATE TABLE llm_reasoning (
            call_id INTEGER PRIMARY KEY REFERENCES llm_calls(id) ON DELETE CASCADE,
            text TEXT NOT NULL
        )
        """,
    ),
    (
        60,
        "workspace bundles imported into this home: which file, for which dataset, what it added",
        """
        CREATE TABLE bundle_imports (
            bundle_sha256 TEXT PRIMARY KEY,
            imported_at REAL NOT NULL,
            dataset TEXT NOT NULL,
            manifest TEXT NOT NULL,
            added TEXT NOT NULL
        )
        """,
    ),
    (
        101,
        "llm capabilities: the endpoint's measured speed with every slot busy (call deadlines)",
        """
        ALTER TABLE llm_capabilities ADD COLUMN prompt_rate REAL;
        ALTER TABLE llm_capabilities ADD COLUMN decode_rate REAL;
        ALTER TABLE llm_capabilities ADD COLUMN rate_slots INTEGER;
        ALTER TABLE llm_capabilities ADD COLUMN rates_at REAL
        """,
    ),
]


def applied_versions(conn: sqlite3.Connection) -> set[int]:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)")
    return {int(r[0]) for r in conn.execute("SELECT version FROM schema_version")}


def current_version(conn: sqlite3.Connection) -> int:
    return max(applied_versions(conn), default=0)


def migrate(conn: sqlite3.Connection, migrations: Iterable[Migration]) -> list[int]:
    """Apply every migration not yet applied, in number order, inside the caller's transaction.

    Returns the numbers applied now. Two migrations with one number are a programming error."""
    todo = sorted(migrations)
    numbers = [m[0] for m in todo]
    if len(numbers) != len(set(numbers)):
        dup = next(n for n in numbers if numbers.count(n) > 1)
        raise ValueError(f"two migrations are numbered {dup}")
    done = applied_versions(conn)
    applied = []
    for number, name, sql in todo:
        if number in done:
            continue
        for statement in filter(str.strip, sql.split(";")):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, ?, strftime('%s','now'))", (number, name))
        applied.append(number)
    return applied


def migrate_database(db: Database, migrations: Iterable[Migration]) -> list[int]:
    """Apply pending migrations to ``db`` in one write transaction."""
    with db.write() as conn:
        return migrate(conn, migrations)
