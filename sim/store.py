"""Simulation runs in the run store: every utterance is written as soon as it exists, exactly once.

One driver at a time: whoever advances a run (a browser tab, ``pal simulate``) holds its lease
(:mod:`backends.store.leases`), renewed on every utterance and released when it stops.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time

from backends.store.db import Database
from backends.store.leases import Lease, LeaseStore
from sim.types import RunRecord, RunSpec, Status, Utterance


def run_id_for(spec: RunSpec) -> str:
    raw = json.dumps(spec.identity(), sort_keys=True)
    return f"run-{spec.user_id}-{spec.method}-{hashlib.sha1(raw.encode()).hexdigest()[:10]}"


LEASE_TTL_S = 90.0  # longer than one utterance takes; a crashed driver's run is free again after it


def _lease_key(run_id: str) -> str:
    return f"sim-run:{run_id}"


class SimStore:
    def __init__(self, db: Database, leases: LeaseStore):
        self.db = db
        self.leases = leases

    # ------------------------------------------------------------------ one driver per run

    def take_lease(self, run_id: str, driver: str, ttl_s: float = LEASE_TTL_S) -> bool:
        """Become (or stay) the run's driver; False when another driver holds it."""
        return self.leases.take(_lease_key(run_id), driver, ttl_s) is not None

    def release_lease(self, run_id: str, driver: str) -> None:
        self.leases.release(_lease_key(run_id), driver)

    def driver(self, run_id: str) -> Lease | None:
        """Who drives the run now (an unexpired lease), if anyone."""
        return self.leases.holder(_lease_key(run_id))

    def create(self, record: RunRecord) -> RunRecord:
        """Insert the run if new; an existing run with this id is returned as stored (resume)."""
        now = time.time()
        with self.db.write() as conn:
            conn.execute("INSERT OR IGNORE INTO sim_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (record.run_id, record.spec.dataset, record.spec.user_id, record.spec.sample_id,
                          record.spec.topic_key, record.spec.method, record.spec.mode, record.spec.seed, record.status,
                          record.model_dump_json(exclude={"utterances"}), now, now))
        return self.load(record.run_id)

    def add_utterance(self, run_id: str, utt: Utterance) -> bool:
        """Save one utterance; returns False when that turn side already exists (never duplicated)."""
        with self.db.write() as conn:
            cur = conn.execute("INSERT OR IGNORE INTO sim_turns VALUES (?, ?, ?, ?, ?)",
                               (run_id, utt.turn_no, utt.side, utt.model_dump_json(), utt.created_at or time.time()))
            conn.execute("UPDATE sim_runs SET updated_at=? WHERE run_id=?", (time.time(), run_id))
            return cur.rowcount == 1

    def count_utterances(self, run_id: str) -> int:
        with self.db.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM sim_turns WHERE run_id=?", (run_id,)).fetchone()[0])

    def set_status(self, run_id: str, status: Status, error: str | None = None) -> None:
        with self.db.write() as conn:
            row = conn.execute("SELECT data FROM sim_runs WHERE run_id=?", (run_id,)).fetchone()
            data = json.loads(row[0])
            data.update({"status": status, "error": error})
            conn.execute("UPDATE sim_runs SET status=?, data=?, updated_at=? WHERE run_id=?",
                         (status, json.dumps(data), time.time(), run_id))

    def exists(self, run_id: str) -> bool:
        with self.db.read() as conn:
            return conn.execute("SELECT 1 FROM sim_runs WHERE run_id=?", (run_id,)).fetchone() is not None

    def load(self, run_id: str) -> RunRecord:
        with self.db.read() as conn:
            row = conn.execute("SELECT data, created_at, updated_at FROM sim_runs WHERE run_id=?", (run_id,)).fetchone()
            if row is None:
                raise KeyError(f"no simulation run {run_id!r}")
            turns = conn.execute("SELECT data FROM sim_turns WHERE run_id=? ORDER BY turn_no, side DESC",
                                 (run_id,)).fetchall()
        record = RunRecord.model_validate_json(row[0])
        record.utterances = [Utterance.model_validate_json(t[0]) for t in turns]
        record.created_at, record.updated_at = row[1], row[2]
        return record

    @staticmethod
    def delete_in(conn: sqlite3.Connection, run_id: str) -> int:
        """Delete the run and its utterances inside the caller's write transaction; the utterances deleted
        (:mod:`studio.discard`, which also deletes what was made of the run)."""
        count = conn.execute("DELETE FROM sim_turns WHERE run_id=?", (run_id,)).rowcount
        conn.execute("DELETE FROM sim_runs WHERE run_id=?", (run_id,))
        return count

    def list(self, **filters: str) -> list[dict]:
        """Run summaries (newest first), optionally filtered by dataset/user_id/method/status/sample_id/topic_key."""
        allowed = {"dataset", "user_id", "method", "status", "sample_id", "topic_key"}
        conds = [f"{k}=?" for k in filters if k in allowed]
        args = [v for k, v in filters.items() if k in allowed]
        sql = ("SELECT r.run_id, r.dataset, r.user_id, r.sample_id, r.topic_key, r.method, r.mode, r.seed, r.status, "
               "r.created_at, r.updated_at, (SELECT COUNT(*) FROM sim_turns t WHERE t.run_id=r.run_id) AS utterances "
               "FROM sim_runs r" + (" WHERE " + " AND ".join(conds) if conds else "") + " ORDER BY r.updated_at DESC")
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute(sql, args)]
