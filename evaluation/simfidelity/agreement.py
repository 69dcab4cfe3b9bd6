"""People check the checker: the automatic checks of simulated user turns against the answers of a ``simturn``
review batch (annotators answered the same questions, blinded to the automatic outcomes).

Per question (= check): the automatic outcome (pass → yes, fail → no, n/a → na) of each item's turn, from the
newest stored result of its run; the human majority of the item's answers (a split vote has none). Items where
either side says "does not apply" are left out of κ and counted. Reported: Cohen's κ of the checks against the
human majority (items with a majority), the agreement rate, Fleiss' κ with the checks and every annotator as raters
(items with the most common number of raters, none saying na, split votes included) and the 2×2 confusion table.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from evaluation.simfidelity.registry import REVIEWED
from evaluation.simfidelity.store import SimFidelityStore
from evaluation.simfidelity.types import RunFidelity
from review.agreement import cohen, fleiss
from review.store import ReviewStore

AUTO = {"pass": "yes", "fail": "no", "n/a": "na"}
CATEGORIES = ["yes", "no"]


def automatic_answers(store: ReviewStore, batch_id: str, results: SimFidelityStore) -> dict[int, dict[str, str]]:
    """item no → question → the automatic answer (yes/no/na); items whose run has no stored result are missing."""
    out: dict[int, dict[str, str]] = {}
    cache: dict[str, RunFidelity | None] = {}
    for item in store.items(batch_id):
        p = item["payload"]
        if p["run_id"] not in cache:
            cache[p["run_id"]] = results.of_run(p["run_id"])
        result = cache[p["run_id"]]
        turn = result.turn(int(p["turn_no"])) if result is not None else None
        if turn is None:
            continue
        out[item["item_no"]] = {q: AUTO[c.outcome] if (c := turn.get(q)) is not None else "na"
                                for q in REVIEWED}
    return out


def _majority(values: list[str]) -> str | None:
    counts = Counter(values).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def checker_agreement(store: ReviewStore, batch_id: str, results: SimFidelityStore) -> dict:
    """``{"questions": [per question: κs, rates, counts, confusion], "items": [per item and question rows],
    "unchecked": items without an automatic result}``."""
    auto = automatic_answers(store, batch_id, results)
    human: dict[tuple[int, str], dict[str, str]] = defaultdict(dict)
    for a in store.answers(batch_id):
        if a["question"] in REVIEWED:
            human[(a["item_no"], a["question"])][a["annotator"]] = a["value"]
    items = {i["item_no"]: i for i in store.items(batch_id)}
    rows, questions = [], []
    for q in REVIEWED:
        pairs, raters, na = [], [], 0
        for no in sorted(items):
            given = human.get((no, q), {})
            if no not in auto or not given:
                continue
            majority = _majority(list(given.values()))
            rows.append({"item_no": no, "item_key": items[no]["item_key"], "question": q, "automatic": auto[no][q],
                         "human_majority": majority or "split", **{f"by {k}": v for k, v in sorted(given.items())}})
            if auto[no][q] != "na" and "na" not in given.values():  # Fleiss needs no majority
                raters.append([auto[no][q], *given.values()])
            if majority is None:
                continue
            if "na" in (auto[no][q], majority):
                na += 1
                continue
            pairs.append([auto[no][q], majority])
        questions.append(_question(q, pairs, raters, na))
    answered = {no for (no, _q) in human}
    return {"questions": questions, "items": rows, "unchecked": sorted(answered - set(auto))}


def _question(q: str, pairs: list[list[str]], raters: list[list[str]], na: int) -> dict:
    kappa = cohen(pairs, CATEGORIES) if pairs else None
    common = Counter(len(r) for r in raters).most_common(1)
    width = common[0][0] if common else 0
    rows = [r for r in raters if len(r) == width] if width >= 2 else []
    fleiss_k = fleiss(rows, CATEGORIES) if rows else None
    confusion = {f"auto {a} / human {h}": sum(1 for x, y in pairs if (x, y) == (a, h)) for a in CATEGORIES
                 for h in CATEGORIES}
    return {"question": q, "items": len(pairs), "not_applicable": na,
            "agreement": sum(a == h for a, h in pairs) / len(pairs) if pairs else None,
            "cohen_kappa": clean(kappa), "fleiss_kappa": clean(fleiss_k), "fleiss_items": len(rows),
            "fleiss_raters": width if rows else 0, "confusion": confusion}


def clean(value: float | None) -> float | None:
    """κ rounded; None when undefined (no items, or nan: every rating in one category)."""
    return None if value is None or value != value else round(value, 4)
