"""Simulator-fidelity results in the run store (table ``sim_fidelity``, migration 27), one row per (run, what was
measured), so the Simulate page's badges, the leaderboard, the CLI and bundles read them back."""

from __future__ import annotations

from backends.store.db import Database
from evaluation.simfidelity.types import RunFidelity


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

    def get(self, key: str) -> RunFidelity | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT data FROM sim_fidelity WHERE key=?", (key,)).fetchone()
        return RunFidelity.model_validate_json(row[0]) if row else None

    def of_run(self, run_id: str) -> RunFidelity | None:
        """The newest result of this run (any settings)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT data FROM sim_fidelity WHERE run_id=? ORDER BY created_at DESC LIMIT 1",
                               (run_id,)).fetchone()
        return RunFidelity.model_validate_json(row[0]) if row else None

    def results(self, dataset: str, run_ids: list[str] | None = None) -> list[RunFidelity]:
        """The newest result per run of a dataset (optionally of these runs), oldest first."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT data FROM sim_fidelity WHERE dataset=? ORDER BY created_at", (dataset,)).fetchall()
        newest: dict[str, RunFidelity] = {}
        for (data,) in rows:
            r = RunFidelity.model_validate_json(data)
            newest[r.run_id] = r
        wanted = set(run_ids) if run_ids is not None else None
        return [r for r in newest.values() if wanted is None or r.run_id in wanted]
