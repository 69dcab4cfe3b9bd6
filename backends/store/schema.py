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
    (
        2,
        "memory builds, versioned items, forgotten items",
        """
        CREATE TABLE memory_builds (
            build_id TEXT PRIMARY KEY,
            dataset TEXT NOT NULL,
            user_id TEXT NOT NULL,
            method TEXT NOT NULL,
            config TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE memory_build_stages (
            build_id TEXT NOT NULL REFERENCES memory_builds(build_id) ON DELETE CASCADE,
            stage INTEGER NOT NULL,
            sample_id TEXT NOT NULL,
            finished_at REAL NOT NULL,
            llm_calls INTEGER NOT NULL DEFAULT 0,
            tokens_in INTEGER NOT NULL DEFAULT 0,
            tokens_out INTEGER NOT NULL DEFAULT 0,
            seconds REAL NOT NULL DEFAULT 0,
            notes TEXT NOT NULL DEFAULT '[]',
            PRIMARY KEY (build_id, stage)
        );
        CREATE TABLE memory_items (
            build_id TEXT NOT NULL REFERENCES memory_builds(build_id) ON DELETE CASCADE,
            item_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            layer TEXT NOT NULL,
            valid_from INTEGER NOT NULL,
            valid_to INTEGER,
            data TEXT NOT NULL,
            PRIMARY KEY (build_id, item_id, version)
        );
        CREATE INDEX memory_items_valid ON memory_items(build_id, valid_from, valid_to);
        CREATE TABLE memory_forgotten (
            build_id TEXT NOT NULL REFERENCES memory_builds(build_id) ON DELETE CASCADE,
            item_id TEXT NOT NULL,
            forgotten_at REAL NOT NULL,
            reason TEXT NOT NULL,
            PRIMARY KEY (build_id, item_id)
        )
        """,
    ),
    (
        3,
        "simulation runs and turns",
        """
        CREATE TABLE sim_runs (
            run_id TEXT PRIMARY KEY,
            dataset TEXT NOT NULL,
            user_id TEXT NOT NULL,
            sample_id TEXT NOT NULL,
            topic_key TEXT NOT NULL,
            method TEXT NOT NULL,
            mode TEXT NOT NULL,
            seed TEXT NOT NULL,
            status TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX sim_runs_task ON sim_runs(dataset, user_id, sample_id, topic_key, method);
        CREATE TABLE sim_turns (
            run_id TEXT NOT NULL REFERENCES sim_runs(run_id) ON DELETE CASCADE,
            turn_no INTEGER NOT NULL,
            side TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (run_id, turn_no, side)
        )
        """,
    ),    (
        4,
        "evaluation judgments and single-turn bench results",
        """
        CREATE TABLE judgments (
            judgment_key TEXT PRIMARY KEY,
            dataset TEXT NOT NULL,
            user_id TEXT NOT NULL,
            sample_id TEXT NOT NULL,
            topic_key TEXT NOT NULL,
            aspect TEXT NOT NULL,
            method_a TEXT NOT NULL,
            method_b TEXT NOT NULL,
            run_a TEXT NOT NULL,
            run_b TEXT NOT NULL,
            k INTEGER NOT NULL,
            judge_model TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX judgments_pair ON judgments(dataset, method_a, method_b, aspect);
        CREATE TABLE bench_results (
            result_key TEXT PRIMARY KEY,
            dataset TEXT NOT NULL,
            user_id TEXT NOT NULL,
            sample_id TEXT NOT NULL,
            topic_key TEXT NOT NULL,
            method TEXT NOT NULL,
            task TEXT NOT NULL,
            model TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX bench_results_method ON bench_results(dataset, method, task)
        """,
    ),
    (
        5,
        "review accounts, batches, assignments and answers",
        """
        CREATE TABLE review_accounts (
            name TEXT PRIMARY KEY,
            role TEXT NOT NULL,
            password_hash TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE review_batches (
            batch_id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            task TEXT NOT NULL,
            dataset TEXT NOT NULL,
            seed INTEGER NOT NULL,
            overlap INTEGER NOT NULL,
            annotators TEXT NOT NULL,
            guidelines TEXT NOT NULL,
            data TEXT NOT NULL,
            created_by TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE review_items (
            batch_id TEXT NOT NULL REFERENCES review_batches(batch_id) ON DELETE CASCADE,
            item_no INTEGER NOT NULL,
            item_key TEXT NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (batch_id, item_no)
        );
        CREATE TABLE review_assignments (
            batch_id TEXT NOT NULL REFERENCES review_batches(batch_id) ON DELETE CASCADE,
            item_no INTEGER NOT NULL,
            annotator TEXT NOT NULL,
            PRIMARY KEY (batch_id, item_no, annotator)
        );
        CREATE INDEX review_assignments_annotator ON review_assignments(annotator, batch_id, item_no);
        CREATE TABLE review_answers (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            batch_id TEXT NOT NULL REFERENCES review_batches(batch_id) ON DELETE CASCADE,
            item_no INTEGER NOT NULL,
            annotator TEXT NOT NULL,
            question TEXT NOT NULL,
            value TEXT NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE (batch_id, item_no, annotator, question)
        )
        """,
    ),
    (
        6,
        "PersonaMem-v2 answer records",
        """
        CREATE TABLE personamem_records (
            history_key TEXT NOT NULL,
            method TEXT NOT NULL,
            item_id TEXT NOT NULL,
            form TEXT NOT NULL,
            seed INTEGER,
            data TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (history_key, method, item_id, form)
        )
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
