"""Agreement per batch and question with statsmodels: Cohen's κ for two annotators, Fleiss' κ for more.

Only items that every assigned annotator answered count. With exactly two annotators in the whole
batch (and overlap 2) the ratings form a 2×2… contingency table for :func:`cohens_kappa`; otherwise
each item's answers are counted per category (:func:`aggregate_raters`) for :func:`fleiss_kappa`,
which needs the same number of ratings per item but not the same raters.
"""

from __future__ import annotations

import math

import numpy as np
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa, fleiss_kappa, to_table

from review.batches import TASKS
from review.store import ReviewStore


def _codes(ratings: list[list[str]], categories: list[str]) -> np.ndarray:
    index = {c: i for i, c in enumerate(categories)}
    return np.array([[index[v] for v in row] for row in ratings], dtype=int)


def cohen(ratings: list[list[str]], categories: list[str]) -> float:
    """Cohen's κ of two raters (rows: items, columns: rater 1, rater 2)."""
    table, _ = to_table(_codes(ratings, categories), bins=np.arange(len(categories) + 1))
    with np.errstate(divide="ignore", invalid="ignore"):  # one category only: κ undefined (nan)
        return float(cohens_kappa(table, return_results=False))


def fleiss(ratings: list[list[str]], categories: list[str]) -> float:
    """Fleiss' κ (rows: items, each with the same number of ratings)."""
    counts, _ = aggregate_raters(_codes(ratings, categories), n_cat=len(categories))
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(fleiss_kappa(counts, method="fleiss"))


def batch_agreement(store: ReviewStore, batch_id: str) -> list[dict]:
    """One row per option question: method, κ (None when undefined), items counted, raters per item."""
    batch = store.batch(batch_id)
    if batch is None:
        raise KeyError(batch_id)
    assigned = store.assignments(batch_id)
    by_item: dict[tuple[int, str], dict[str, str]] = {}
    for a in store.answers(batch_id):
        by_item.setdefault((a["item_no"], a["question"]), {})[a["annotator"]] = a["value"]
    out = []
    for q in TASKS[batch["task"]].questions:
        if q.free_text:
            continue
        categories = [v for v, _ in q.options]
        full = [(no, people) for no, people in assigned.items()
                if len(people) >= 2 and set(people) <= set(by_item.get((no, q.key), {}))]
        raters = sorted({p for _, people in full for p in people})
        method, kappa = ("Cohen" if len(raters) == 2 else "Fleiss"), None
        if full:
            if method == "Cohen":
                rows = [[by_item[(no, q.key)][r] for r in raters] for no, _ in full]
                kappa = cohen(rows, categories)
            else:
                rows = [[by_item[(no, q.key)][p] for p in people] for no, people in full]
                kappa = fleiss(rows, categories)
            if kappa is not None and math.isnan(kappa):
                kappa = None
        out.append({"question": q.key, "label": q.label, "method": method, "kappa": kappa, "items": len(full),
                    "raters_per_item": batch["overlap"], "annotators": len(raters)})
    return out


def disagreements(store: ReviewStore, batch_id: str) -> list[dict]:
    """Items and questions where the annotators' answers differ: the work list."""
    batch = store.batch(batch_id)
    if batch is None:
        raise KeyError(batch_id)
    option_qs = {q.key for q in TASKS[batch["task"]].questions if not q.free_text}
    by_item: dict[tuple[int, str], dict[str, str]] = {}
    for a in store.answers(batch_id):
        if a["question"] in option_qs:
            by_item.setdefault((a["item_no"], a["question"]), {})[a["annotator"]] = a["value"]
    return [{"item_no": no, "question": q, "answers": answers}
            for (no, q), answers in sorted(by_item.items()) if len(set(answers.values())) > 1]
