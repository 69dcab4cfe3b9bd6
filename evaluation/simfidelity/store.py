"""Simulator-fidelity results in the run store (table ``sim_fidelity``, migration 27), one row per (run, what was
measured), so the Simulate page's badges, the leaderboard, the CLI and bundles read them back."""

from __future__ import annotations

import logging
import sqlite3

from backends.store.db import Database
from evaluation.simfidelity.types import RunFidelity

log = logging.getLogger(__name__)


def _absent(e: sqlite3.OperationalError) -> bool:
    """A run store older than migration 27 opened read-only (a presentation imported by an earlier version): it has
    no results, rather than an error."""
    if "no such table: sim_fidelity" in str(e):
        log.info("this run store has no sim_fidelity table (made before migration 27): no results")
        return True
    return False


def rekey(key: str, run_id: str) -> str:
    """The key of the same measurement of the same run stored under another run id (a bundle moved home)."""
    return f"simfid-{run_id}-{key.rsplit('-', 1)[1]}"


class SimFidelityStore:
    def __init__(self, db: Database):
        self.db = db

    def save(self, result: RunFidelity) -> None:
        if not result.key:
            raise ValueError(f"simulator fidelity of run {result.run_id} has no key")
        with self.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO sim_fidelity VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (result.key, result.run_id, result.dataset, result.user_id, result.method, result.simulator,
                          result.embedder, result.model_dump_json(), result.created_at))

    @staticmethod
    def delete_of_run_in(conn: sqlite3.Connection, run_id: str) -> int:
        """Delete the run's results inside the caller's write transaction; how many."""
        return conn.execute("DELETE FROM sim_fidelity WHERE run_id=?", (run_id,)).rowcount

    def _rows(self, sql: str, args: tuple) -> list:
        try:
            with self.db.read() as conn:
                return conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as e:
            if _absent(e):
                return []
            raise

    def get(self, key: str) -> RunFidelity | None:
        rows = self._rows("SELECT data FROM sim_fidelity WHERE key=?", (key,))
        return RunFidelity.model_validate_json(rows[0][0]) if rows else None

    def of_run(self, run_id: str) -> RunFidelity | None:
        """The newest result of this run (any settings)."""
        rows = self._rows("SELECT data FROM sim_fidelity WHERE run_id=? ORDER BY created_at DESC LIMIT 1", (run_id,))
        return RunFidelity.model_validate_json(rows[0][0]) if rows else None

    def results(self, dataset: str, run_ids: list[str] | None = None) -> list[RunFidelity]:
        """The newest result per run of a dataset (optionally of these runs), oldest first."""
        rows = self._rows("SELECT data FROM sim_fidelity WHERE dataset=? ORDER BY created_at", (dataset,))
        newest: dict[str, RunFidelity] = {}
        for (data,) in rows:
            r = RunFidelity.model_validate_json(data)
            newest[r.run_id] = r
        wanted = set(run_ids) if run_ids is not None else None
        return [r for r in newest.values() if wanted is None or r.run_id in wanted]
