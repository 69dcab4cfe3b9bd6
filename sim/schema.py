"""Tables of simulation runs and their utterances.

Applied by the composition root with every other domain's migrations (see :mod:`backends.store.schema`)."""

from __future__ import annotations

from backends.store.schema import Migration

MIGRATIONS: list[Migration] = [
    (
        3,
        'simulation runs and turns',
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
    ),
]
