"""Judgments and single-turn bench results in the run store (SQLite), keyed so re-running resumes."""

from __future__ import annotations

import time
from pathlib import Path

from backends.paths import state_path
from backends.store.db import connect
from backends.store.runstore import RunStore
from evaluation.faireval import Judgment
from evaluation.tasks import TaskResult


class EvalStore:
    """Judgments (table ``judgments``) and bench task results (table ``bench_results``)."""

    def __init__(self, path: Path | None = None):
        self.path = path or state_path("runs.sqlite")
        RunStore(self.path)  # applies the migrations

    def has_judgment(self, key: str) -> bool:
        with connect(self.path) as conn:
            return conn.execute("SELECT 1 FROM judgments WHERE judgment_key=?", (key,)).fetchone() is not None

    def save_judgment(self, j: Judgment) -> bool:
        """Insert once; returns False when a judgment with this key already exists (never overwritten)."""
        with connect(self.path) as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO judgments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (j.judgment_key, j.dataset, j.user_id, j.sample_id, j.topic_key, j.aspect, j.method_a, j.method_b,
                 j.run_a, j.run_b, j.k, j.judge_model, j.prompt_version, j.model_dump_json(), j.created_at or time.time()))
            return cur.rowcount == 1

    def load_judgment(self, key: str) -> Judgment:
        with connect(self.path) as conn:
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
        with connect(self.path) as conn:
            return [Judgment.model_validate_json(r[0]) for r in conn.execute(sql, args)]

    def get_result(self, key: str) -> TaskResult | None:
        with connect(self.path) as conn:
            row = conn.execute("SELECT data FROM bench_results WHERE result_key=?", (key,)).fetchone()
        return TaskResult.model_validate_json(row[0]) if row else None

    def results(self, dataset: str) -> list[TaskResult]:
        """Stored single-turn results of a dataset: the newest per (user, topic, method, task)."""
        with connect(self.path) as conn:
            rows = conn.execute("SELECT data FROM bench_results WHERE dataset=? ORDER BY created_at",
                                (dataset,)).fetchall()
        newest: dict[tuple, TaskResult] = {}
        for row in rows:
            r = TaskResult.model_validate_json(row[0])
            newest[(r.user_id, r.sample_id, r.topic_key, r.method, r.task)] = r
        return list(newest.values())

    def save_result(self, r: TaskResult) -> bool:
        with connect(self.path) as conn:
            cur = conn.execute("INSERT OR IGNORE INTO bench_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               (r.result_key, r.dataset, r.user_id, r.sample_id, r.topic_key, r.method, r.task,
                                r.model, r.prompt_version, r.model_dump_json(), r.created_at or time.time()))
            return cur.rowcount == 1
