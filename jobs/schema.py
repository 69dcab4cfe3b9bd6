"""Tables of jobs, their units and the units' dependencies (migration 30); the ready-queue (migration 141); the foreground runs of
jobs with their wall and CPU seconds (migration 142).

``job_ready`` holds exactly the queued units whose dependencies are all done, with the job's pool and creation
time copied beside them, so a claim reads the first row of an index instead of testing every queued unit's
dependencies under the write lock (:class:`jobs.store.JobStore` keeps it in step with every status change).

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
    (
        141,
        "jobs: the ready-queue (queued units whose dependencies are done), indexed in claim order",
        """
        CREATE TABLE job_ready (
            unit_id TEXT PRIMARY KEY REFERENCES job_units(unit_id) ON DELETE CASCADE,
            job_id TEXT NOT NULL,
            pool TEXT NOT NULL,
            kind TEXT NOT NULL,
            created_at REAL NOT NULL,
            seq INTEGER NOT NULL
        );
        CREATE INDEX job_ready_order ON job_ready(created_at, job_id, seq);
        CREATE INDEX job_ready_job ON job_ready(job_id, seq);
        CREATE INDEX job_ready_pool ON job_ready(pool, created_at, job_id, seq);
        CREATE INDEX job_deps_dep ON job_deps(dep_id);
        INSERT INTO job_ready SELECT u.unit_id, u.job_id, j.pool, u.kind, j.created_at, u.seq
            FROM job_units u JOIN jobs j USING (job_id) WHERE u.status = 'queued' AND NOT EXISTS (
                SELECT 1 FROM job_deps d JOIN job_units p ON p.unit_id = d.dep_id
                WHERE d.unit_id = u.unit_id AND p.status != 'done')
        """,
    ),
    (
        142,
        "jobs: each foreground run of a job with its wall and this process's CPU seconds (plans read the app's cost)",
        """
        CREATE TABLE job_runs (
            job_id TEXT NOT NULL REFERENCES jobs(job_id) ON DELETE CASCADE,
            started_at REAL NOT NULL,
            ended_at REAL NOT NULL,
            wall_s REAL NOT NULL,
            cpu_s REAL NOT NULL,
            units INTEGER NOT NULL,
            executor TEXT NOT NULL
        );
        CREATE INDEX job_runs_job ON job_runs(job_id)
        """,
    ),
]
