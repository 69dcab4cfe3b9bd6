"""Exports of a batch: its items with assignments, and every answer, as CSV or JSON lines."""

from __future__ import annotations

import json

from backends.csvsafe import rows_to_csv
from review.batches import winner
from review.store import ReviewStore


def item_rows(store: ReviewStore, batch_id: str) -> list[dict]:
    batch = store.batch(batch_id)
    if batch is None:
        raise KeyError(batch_id)
    assigned = store.assignments(batch_id)
    return [{"batch_id": batch_id, "task": batch["task"], "seed": batch["seed"], "item_no": it["item_no"],
             "item_key": it["item_key"], "annotators": ";".join(assigned.get(it["item_no"], [])),
             "payload": json.dumps(it["payload"], ensure_ascii=False)} for it in store.items(batch_id)]


def answer_rows(store: ReviewStore, batch_id: str) -> list[dict]:
    batch = store.batch(batch_id)
    if batch is None:
        raise KeyError(batch_id)
    items = {it["item_no"]: it for it in store.items(batch_id)}
    rows = []
    for a in store.answers(batch_id):
        item = items[a["item_no"]]
        row = {"batch_id": batch_id, "task": batch["task"], "item_no": a["item_no"], "item_key": item["item_key"],
               "annotator": a["annotator"], "question": a["question"], "value": a["value"],
               "created_at": a["created_at"]}
        if batch["task"] == "pairwise":
            p = item["payload"]
            row.update({"swap": bool(p.get("swap")), "method_a": p["method_a"], "method_b": p["method_b"],
                        "favours": winner(p, a["value"])})
        rows.append(row)
    return rows


def to_csv(rows: list[dict]) -> str:
    """CSV with formula-like cells (``= + - @`` first) neutralised: annotators' free text stays text in Excel."""
    return rows_to_csv(rows)


def to_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
