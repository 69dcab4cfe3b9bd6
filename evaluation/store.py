"""Judgments and single-turn bench results in the run store (SQLite), keyed so re-running resumes."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable

from backends.store.db import Database
from evaluation.faireval import Judgment
from evaluation.personamem.evaluate import PMRecord
from evaluation.tasks import TaskResult


def _keys_reading(conn: sqlite3.Connection, run_id: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT judgment_key FROM judgments WHERE run_a=? OR run_b=?", (run_id, run_id))]


class EvalStore:
    """Judgments (table ``judgments``) and bench task results (table ``bench_results``)."""

    def __init__(self, db: Database):
        self.db = db

    def has_judgment(self, key: str) -> bool:
        with self.db.read() as conn:
            return conn.execute("SELECT 1 FROM judgments WHERE judgment_key=?", (key,)).fetchone() is not None

    def save_judgment(self, j: Judgment) -> bool:
        """Insert once; returns False when a judgment with this key already exists (never overwritten)."""
        with self.db.write() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO judgments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (j.judgment_key, j.dataset, j.user_id, j.sample_id, j.topic_key, j.aspect, j.method_a, j.method_b,
                 j.run_a, j.run_b, j.k, j.judge_model, j.prompt_version, j.model_dump_json(), j.created_at or time.time()))
            return cur.rowcount == 1

    def load_judgment(self, key: str) -> Judgment:
        with self.db.read() as conn:
            row = conn.execute("SELECT data FROM judgments WHERE judgment_key=?", (key,)).fetchone()
        if row is None:
            raise KeyError(f"no judgment {key!r}")
        return Judgment.model_validate_json(row[0])

    def judgments(self, **filters: str) -> list[Judgment]:
        """Stored judgments, oldest first, filtered by dataset/method_a/method_b/aspect/user_id."""
        allowed = {"dataset", "method_a", "method_b", "aspect", "user_id"}
        conds = [f"{k}=?" for k in filters if k in allowed]
        args = [v for k, v in filters.items() if k in allowed]
        sql = "SELECT data FROM judgments" + (" WHERE " + " AND ".join(conds) if conds else "") + " ORDER BY created_at"
        with self.db.read() as conn:
            return [Judgment.model_validate_json(r[0]) for r in conn.execute(sql, args)]

    def keys_reading(self, run_id: str) -> list[str]:
        """The keys of the judgments that read ``run_id`` (either side), without loading them."""
        with self.db.read() as conn:
            return _keys_reading(conn, run_id)

    @staticmethod
    def delete_judgments_of_run_in(conn: sqlite3.Connection, run_id: str) -> list[str]:
        """Delete the judgments that read ``run_id`` (either side) inside the caller's write transaction; their keys."""
        keys = _keys_reading(conn, run_id)
        conn.execute("DELETE FROM judgments WHERE run_a=? OR run_b=?", (run_id, run_id))
        return keys

    def get_result(self, key: str) -> TaskResult | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT data FROM bench_results WHERE result_key=?", (key,)).fetchone()
        return TaskResult.model_validate_json(row[0]) if row else None

    def any_result(self, dataset: str) -> bool:
        """Whether a single-turn result of this dataset is stored (without reading any)."""
        with self.db.read() as conn:
            return conn.execute("SELECT 1 FROM bench_results WHERE dataset=? LIMIT 1", (dataset,)).fetchone() is not None

    def results(self, dataset: str) -> list[TaskResult]:
        """Stored single-turn results of a dataset: the newest per (user, topic, method, task)."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT data FROM bench_results WHERE dataset=? ORDER BY created_at",
                                (dataset,)).fetchall()
        newest: dict[tuple, TaskResult] = {}
        for row in rows:
            r = TaskResult.model_validate_json(row[0])
            newest[(r.user_id, r.sample_id, r.topic_key, r.method, r.task)] = r
        return list(newest.values())

    def save_result(self, r: TaskResult) -> bool:
        with self.db.write() as conn:
            cur = conn.execute("INSERT OR IGNORE INTO bench_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               (r.result_key, r.dataset, r.user_id, r.sample_id, r.topic_key, r.method, r.task,
                                r.model, r.prompt_version, r.model_dump_json(), r.created_at or time.time()))
            return cur.rowcount == 1


class PersonaMemStore:
    """PersonaMem-v2 answer records (table ``personamem_records``), one per (history, method, item, form)."""

    def __init__(self, db: Database):
        self.db = db

    def save(self, records: Iterable[PMRecord], history_key: str) -> int:
        """Store (or replace) answer records for one chat history; returns how many were written."""
        n = 0
        with self.db.write() as conn:
            for r in records:
                conn.execute("INSERT OR REPLACE INTO personamem_records VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (history_key, r.method, r.item_id, r.form, r.seed, r.model_dump_json(), time.time()))
                n += 1
        return n

    def records(self, method: str | None = None) -> list[PMRecord]:
        """Every stored record (optionally of one method)."""
        sql = "SELECT data FROM personamem_records" + (" WHERE method = ?" if method else "") + " ORDER BY method, item_id"
        with self.db.read() as conn:
            return [PMRecord.model_validate_json(row[0]) for row in conn.execute(sql, (method,) if method else ())]
