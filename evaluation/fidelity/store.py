"""Fidelity reports in the run store (table ``memory_fidelity``, migration 20), keyed by what was measured,
so a page reopens a result instantly and other features (exports, leaderboards) can read them."""

from __future__ import annotations

from backends.store.db import Database
from evaluation.fidelity.types import FidelityReport


class FidelityStore:
    def __init__(self, db: Database):
        self.db = db

    def save(self, report: FidelityReport) -> None:
        """Insert or replace the report under its ``fidelity_key`` (the same measurement gives the same figures)."""
        if not report.fidelity_key:
            raise ValueError(f"fidelity report of {report.method} for user {report.user_id} has no fidelity_key")
        with self.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO memory_fidelity VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (report.fidelity_key, report.dataset, report.user_id, report.method, report.build_id,
                          report.embedder, report.threshold, report.model_dump_json(), report.created_at))

    def get(self, fidelity_key: str) -> FidelityReport | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT data FROM memory_fidelity WHERE fidelity_key=?", (fidelity_key,)).fetchone()
        return FidelityReport.model_validate_json(row[0]) if row else None

    def reports(self, dataset: str, user_id: str | None = None, method: str | None = None) -> list[FidelityReport]:
        """Stored reports of a dataset, oldest first, optionally of one user and/or method."""
        sql = "SELECT data FROM memory_fidelity WHERE dataset=?"
        args: list[object] = [dataset]
        for column, value in (("user_id", user_id), ("method", method)):
            if value is not None:
                sql += f" AND {column}=?"
                args.append(value)
        with self.db.read() as conn:
            rows = conn.execute(sql + " ORDER BY created_at", args).fetchall()
        return [FidelityReport.model_validate_json(r[0]) for r in rows]

    def any_report(self, dataset: str) -> bool:
        """Whether a report of this dataset is stored (without reading any)."""
        with self.db.read() as conn:
            return conn.execute("SELECT 1 FROM memory_fidelity WHERE dataset=? LIMIT 1", (dataset,)).fetchone() is not None

    def latest(self, dataset: str) -> list[FidelityReport]:
        """The newest report per (user, method, embedder, threshold) of a dataset: what a leaderboard shows."""
        newest: dict[tuple, FidelityReport] = {}
        for r in self.reports(dataset):
            newest[(r.user_id, r.method, r.embedder, r.threshold)] = r
        return sorted(newest.values(), key=lambda r: (r.method, r.user_id))
