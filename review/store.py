"""Batches, items, assignments and answers in the run store. Each answer is one row, written when given."""

from __future__ import annotations

import hashlib
import json
import time

from backends.store.db import Database
from review.batches import TASKS, BatchPlan, assign


class BatchAnswered(ValueError):
    """A review batch somebody answered in is kept: the message says how many answers, by how many annotators."""


class ReviewStore:
    def __init__(self, db: Database):
        self.db = db

    # ------------------------------------------------------------------ batches

    def create_batch(self, plan: BatchPlan, created_by: str) -> str:
        raw = json.dumps([plan.title, plan.task, plan.seed, time.time_ns()])
        batch_id = f"b-{hashlib.sha1(raw.encode()).hexdigest()[:8]}"
        assignment = assign(len(plan.items), plan.annotators, plan.overlap)
        data = {**plan.data, "item_keys": [k for k, _ in plan.items]}
        with self.db.write() as conn:
            conn.execute("INSERT INTO review_batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (batch_id, plan.title, plan.task, plan.dataset, plan.seed, plan.overlap,
                          json.dumps(plan.annotators), plan.guidelines, json.dumps(data), created_by, time.time()))
            for no, ((key, payload), people) in enumerate(zip(plan.items, assignment), start=1):
                conn.execute("INSERT INTO review_items VALUES (?, ?, ?, ?)",
                             (batch_id, no, key, json.dumps(payload, ensure_ascii=False)))
                conn.executemany("INSERT INTO review_assignments VALUES (?, ?, ?)",
                                 [(batch_id, no, a) for a in people])
        return batch_id

    def delete_batch(self, batch_id: str) -> dict:
        """Delete a batch with its items and assignments; returns the deleted batch (with ``items``). Why: a batch
        shows its annotators fixed transcripts, so a run it shows cannot be recorded anew until the batch goes
        (``pal runs discard`` refuses such a run). Refused with :class:`BatchAnswered`, nothing deleted, once anybody
        has answered (people's work is not thrown away with it); ``KeyError`` for a batch that is not stored."""
        with self.db.write() as conn:
            row = conn.execute("SELECT * FROM review_batches WHERE batch_id=?", (batch_id,)).fetchone()
            if row is None:
                raise KeyError(f"no review batch {batch_id}")
            answered = conn.execute("SELECT COUNT(*), COUNT(DISTINCT annotator) FROM review_answers WHERE batch_id=?",
                                    (batch_id,)).fetchone()
            if answered[0]:
                raise BatchAnswered(f"review batch {batch_id} not deleted: {answered[1]} annotator(s) gave "
                                    f"{answered[0]} answer(s) in it")
            items = conn.execute("SELECT COUNT(*) FROM review_items WHERE batch_id=?", (batch_id,)).fetchone()[0]
            conn.execute("DELETE FROM review_batches WHERE batch_id=?", (batch_id,))  # items, assignments cascade
        return {**self._batch(row), "items": items}

    def batches_showing_run(self, run_id: str) -> list[str]:
        """The review batches with an item that shows ``run_id`` (either side of a pair) to annotators."""
        with self.db.read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT DISTINCT batch_id FROM review_items WHERE json_extract(payload, '$.run_a')=? "
                "OR json_extract(payload, '$.run_b')=? OR json_extract(payload, '$.run_id')=? ORDER BY batch_id",
                (run_id, run_id, run_id))]

    @staticmethod
    def _batch(row) -> dict:
        out = dict(row)
        out["annotators"] = json.loads(out["annotators"])
        out["data"] = json.loads(out["data"])
        return out

    def batch(self, batch_id: str) -> dict | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT * FROM review_batches WHERE batch_id=?", (batch_id,)).fetchone()
        return self._batch(row) if row else None

    def batches(self, annotator: str | None = None) -> list[dict]:
        """Every batch (newest first), or only those with items assigned to ``annotator``."""
        sql = "SELECT * FROM review_batches"
        args: tuple = ()
        if annotator is not None:
            sql += " WHERE batch_id IN (SELECT batch_id FROM review_assignments WHERE annotator=?)"
            args = (annotator,)
        with self.db.read() as conn:
            return [self._batch(r) for r in conn.execute(sql + " ORDER BY created_at DESC", args)]

    # ------------------------------------------------------------------ items

    def item(self, batch_id: str, item_no: int) -> dict | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT item_no, item_key, payload FROM review_items WHERE batch_id=? AND item_no=?",
                               (batch_id, item_no)).fetchone()
        return {"item_no": row[0], "item_key": row[1], "payload": json.loads(row[2])} if row else None

    def items(self, batch_id: str) -> list[dict]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT item_no, item_key, payload FROM review_items WHERE batch_id=? ORDER BY item_no",
                                (batch_id,)).fetchall()
        return [{"item_no": r[0], "item_key": r[1], "payload": json.loads(r[2])} for r in rows]

    def assigned(self, batch_id: str, annotator: str) -> list[int]:
        with self.db.read() as conn:
            return [r[0] for r in conn.execute("SELECT item_no FROM review_assignments WHERE batch_id=? AND annotator=? "
                                               "ORDER BY item_no", (batch_id, annotator))]

    def assignments(self, batch_id: str) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        with self.db.read() as conn:
            for no, who in conn.execute("SELECT item_no, annotator FROM review_assignments WHERE batch_id=? "
                                        "ORDER BY item_no, rowid", (batch_id,)):
                out.setdefault(no, []).append(who)
        return out

    def join(self, batch_id: str, annotator: str) -> int:
        """Assign every item of the batch to ``annotator`` as well (an admin annotating a batch drawn for others,
        e.g. the demo's under local sign-in); how many items were newly assigned."""
        with self.db.write() as conn:
            return conn.execute("INSERT OR IGNORE INTO review_assignments (batch_id, item_no, annotator) "
                                "SELECT batch_id, item_no, ? FROM review_items WHERE batch_id=?",
                                (annotator, batch_id)).rowcount

    def is_assigned(self, batch_id: str, item_no: int, annotator: str) -> bool:
        with self.db.read() as conn:
            return conn.execute("SELECT 1 FROM review_assignments WHERE batch_id=? AND item_no=? AND annotator=?",
                                (batch_id, item_no, annotator)).fetchone() is not None

    # ------------------------------------------------------------------ answers

    def answer(self, batch_id: str, item_no: int, annotator: str, question: str, value: str) -> None:
        """Save one answer now (replacing an earlier answer to the same question); only for assigned items."""
        with self.db.write() as conn:
            if conn.execute("SELECT 1 FROM review_assignments WHERE batch_id=? AND item_no=? AND annotator=?",
                            (batch_id, item_no, annotator)).fetchone() is None:
                raise PermissionError(f"item {item_no} of {batch_id} is not assigned to {annotator}")
            conn.execute("DELETE FROM review_answers WHERE batch_id=? AND item_no=? AND annotator=? AND question=?",
                         (batch_id, item_no, annotator, question))
            conn.execute("INSERT INTO review_answers (batch_id, item_no, annotator, question, value, created_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (batch_id, item_no, annotator, question, value, time.time()))

    def undo_last(self, batch_id: str, annotator: str) -> dict | None:
        """Remove this annotator's most recent answer in the batch; returns it (None when there is none)."""
        with self.db.write() as conn:
            row = conn.execute("SELECT * FROM review_answers WHERE batch_id=? AND annotator=? ORDER BY id DESC LIMIT 1",
                               (batch_id, annotator)).fetchone()
            if row is None:
                return None
            conn.execute("DELETE FROM review_answers WHERE id=?", (row["id"],))
        return dict(row)

    def answers(self, batch_id: str, annotator: str | None = None, item_no: int | None = None) -> list[dict]:
        sql = "SELECT * FROM review_answers WHERE batch_id=?"
        args: list[object] = [batch_id]
        if annotator is not None:
            sql, args = sql + " AND annotator=?", [*args, annotator]
        if item_no is not None:
            sql, args = sql + " AND item_no=?", [*args, item_no]
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute(sql + " ORDER BY id", args)]

    def count_answers(self, batch_id: str | None = None) -> int:
        with self.db.read() as conn:
            if batch_id is None:
                return int(conn.execute("SELECT COUNT(*) FROM review_answers").fetchone()[0])
            return int(conn.execute("SELECT COUNT(*) FROM review_answers WHERE batch_id=?", (batch_id,)).fetchone()[0])

    def done_items(self, batch_id: str, task: str, annotator: str) -> set[int]:
        """Items where this annotator answered every required question."""
        required = {q.key for q in TASKS[task].required}
        given: dict[int, set[str]] = {}
        for a in self.answers(batch_id, annotator):
            given.setdefault(a["item_no"], set()).add(a["question"])
        return {no for no, qs in given.items() if required <= qs}

    def progress(self, batch_id: str, task: str, annotator: str) -> tuple[int, int]:
        mine = self.assigned(batch_id, annotator)
        return len(self.done_items(batch_id, task, annotator) & set(mine)), len(mine)

    def first_unanswered(self, batch_id: str, task: str, annotator: str) -> int | None:
        done = self.done_items(batch_id, task, annotator)
        return next((no for no in self.assigned(batch_id, annotator) if no not in done), None)
