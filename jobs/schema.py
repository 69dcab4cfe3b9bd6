"""Tables of jobs, their units and the units' dependencies (migration 30).

Applied by the composition root with every other domain's migrations (see :mod:`backends.store.schema`)."""

from __future__ import annotations

from backends.store.schema import Migration

MIGRATIONS: list[Migration] = [
    (
        30,
        "jobs, units, unit dependencies",
        """
        CREATE TABLE jobs (
            job_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            title TEXT NOT NULL,
            created_by TEXT NOT NULL,
            pool TEXT NOT NULL,
            config TEXT NOT NULL DEFAULT '{}',
            cancelled INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE job_units (
            unit_id TEXT PRIMARY KEY,
            job_id TEXT NOT NULL REFERENCES jobs(job_id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            label TEXT NOT NULL,
            payload TEXT NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL DEFAULT 1,
            last_error TEXT,
            progress REAL NOT NULL DEFAULT 0,
            progress_text TEXT NOT NULL DEFAULT '',
            lease_owner TEXT,
            lease_until REAL,
            started_at REAL,
            finished_at REAL,
            seconds REAL NOT NULL DEFAULT 0,
            result TEXT
        );
        CREATE INDEX job_units_job ON job_units(job_id, status);
        CREATE INDEX job_units_status ON job_units(status);
        CREATE TABLE job_deps (
            unit_id TEXT NOT NULL REFERENCES job_units(unit_id) ON DELETE CASCADE,
            dep_id TEXT NOT NULL REFERENCES job_units(unit_id) ON DELETE CASCADE,
            PRIMARY KEY (unit_id, dep_id)
        )
        """,
    ),
]
