"""Tables of memory builds: builds, stages, versioned items, forgotten items.

Applied by the composition root with every other domain's migrations (see :mod:`backends.store.schema`)."""

from __future__ import annotations

from backends.store.schema import Migration

MIGRATIONS: list[Migration] = [
    (
        2,
        'memory builds, versioned items, forgotten items',
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
        13,
        'memory item edits: the previous text of every edit by a person',
        """
        CREATE TABLE memory_item_edits (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            build_id TEXT NOT NULL REFERENCES memory_builds(build_id) ON DELETE CASCADE,
            item_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            edited_at REAL NOT NULL,
            editor TEXT NOT NULL,
            previous_text TEXT NOT NULL,
            new_text TEXT NOT NULL
        );
        CREATE INDEX memory_item_edits_item ON memory_item_edits(build_id, item_id)
        """,
    ),
]
