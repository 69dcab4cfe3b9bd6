"""Judge–human agreement for pairwise comparisons: FairEval judgments against pairwise review answers.

Human answers are read per item and aspect (the question keys ``requirement`` / ``preference`` are the
judge's aspects). Each answer is turned into the method it favours (the item records the randomised A/B
order), so the orientation no longer matters; a judgment's decision is turned into a favoured method
the same way (win: its method A, lose: its method B). Both sides are then read from one reference
method's side: ``win`` means the reference method is better, on both sides.

Per item the human side is the majority vote over its annotators: a favoured method, ``tie``, or a
*split* when no answer has a strict majority. Items are matched on (user, sample, topic, aspect, method
pair); the newest judgment with a valid decision counts. Reported: the agreement rate on matched items
that neither side called a tie (splits excluded), Cohen's κ (statsmodels) of the judge against the
human majority on those items, the same κ over all three categories, and the 3×3 confusion table
(judge × human majority).

Mem-PAL's Table 12 reports **Fleiss' κ on non-tie items** instead; the paper does not say over which
raters, so two are given, each labelled: the judge and every annotator as raters of each matched item,
and the annotators alone; an item counts when none of its raters said tie, with the number of raters
most items have (Fleiss' κ needs the same count per item).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from evaluation.faireval import ASPECTS, Judgment
from review.agreement import cohen, fleiss
from review.batches import winner
from review.store import ReviewStore

OUTCOMES = ("win", "tie", "lose")
Key = tuple[str, str, str, str, frozenset]


@dataclass(frozen=True)
class HumanVote:
    """The answers to one pairwise item and aspect, as favoured methods (or ``tie``) per annotator."""

    user_id: str
    sample_id: str
    topic_key: str
    aspect: str
    methods: tuple[str, str]  # (method_a, method_b) as the item stores them
    votes: dict[str, str]  # annotator -> favoured method or "tie"
    batch_id: str = ""
    item_no: int = 0

    @property
    def majority(self) -> str | None:
        """The favoured method or ``tie`` with a strict majority of the votes; None for a split."""
        ranked = Counter(self.votes.values()).most_common()
        if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
            return None
        return ranked[0][0]

    @property
    def key(self) -> Key:
        return (self.user_id, self.sample_id, self.topic_key, self.aspect, frozenset(self.methods))


@dataclass
class AgreementReport:
    """Judge–human agreement over one method pair; ``win`` is from ``pair[0]``'s side."""

    pair: tuple[str, str]
    items: int = 0  # human items (with at least one answer) of this pair
    matched: int = 0  # of those, with a valid judgment
    unmatched: int = 0  # of those, without one
    unmatched_judgments: int = 0  # valid judgments of the pair with no human item
    splits: int = 0  # matched items without a human majority
    human_ties: int = 0
    judge_ties: int = 0
    compared: int = 0  # matched items, no split, neither side a tie
    agreements: int = 0
    agreement_rate: float | None = None
    kappa: float | None = None  # Cohen's κ on the compared items (win/lose)
    kappa_all: float | None = None  # Cohen's κ on all matched items with a majority (win/tie/lose)
    fleiss: float | None = None  # Fleiss' κ, raters = the judge + each annotator, non-tie items (Mem-PAL Table 12)
    fleiss_items: int = 0
    fleiss_raters: int = 0  # ratings per item it was computed over
    fleiss_humans: float | None = None  # Fleiss' κ among the annotators only, non-tie items
    fleiss_humans_items: int = 0
    confusion: pd.DataFrame = field(default_factory=lambda: confusion_table([]))
    rows: list[dict] = field(default_factory=list)  # one per human item


# ---------------------------------------------------------------------------------------------- inputs


def pairwise_votes(store: ReviewStore, batch_ids: Iterable[str] | None = None,
                   dataset: str | None = None) -> list[HumanVote]:
    """Every answered pairwise item and aspect of the given batches (default: all pairwise batches,
    optionally of one dataset). An item in several batches pools its annotators; a later batch's
    answer of the same annotator replaces an earlier one."""
    if batch_ids is None:
        batches = [b for b in reversed(store.batches()) if b["task"] == "pairwise"]  # oldest first
    else:
        batches = [b for b in (store.batch(i) for i in batch_ids) if b and b["task"] == "pairwise"]
    if dataset is not None:
        batches = [b for b in batches if b["dataset"] == dataset]
    out: dict[Key, HumanVote] = {}
    for b in batches:
        items = {it["item_no"]: it["payload"] for it in store.items(b["batch_id"])}
        for a in store.answers(b["batch_id"]):
            payload = items.get(a["item_no"])
            if payload is None or a["question"] not in ASPECTS or a["value"] not in ("A", "B", "tie"):
                continue
            vote = HumanVote(payload["user_id"], payload["sample_id"], payload["topic_key"], a["question"],
                             (payload["method_a"], payload["method_b"]), {}, b["batch_id"], a["item_no"])
            vote = out.setdefault(vote.key, vote)
            vote.votes[a["annotator"]] = winner(payload, a["value"])
    return list(out.values())


def judge_favours(j: Judgment) -> str | None:
    """The method a judgment favours, ``tie``, or None when it has no valid decision."""
    return {"win": j.method_a, "lose": j.method_b, "tie": "tie"}.get(j.decision)


def favoured_side(favoured: str, reference: str) -> str:
    """A favoured method (or ``tie``) as win/tie/lose from ``reference``'s side."""
    return "tie" if favoured == "tie" else "win" if favoured == reference else "lose"


def confusion_table(pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """3×3 counts: rows judge win/tie/lose, columns human win/tie/lose."""
    counts = Counter(pairs)
    frame = pd.DataFrame([[counts[(j, h)] for h in OUTCOMES] for j in OUTCOMES],
                         index=[f"judge {o}" for o in OUTCOMES], columns=[f"human {o}" for o in OUTCOMES])
    frame.index.name = "judge \\ human"
    return frame


def non_tie_fleiss(ratings: list[list[str]]) -> tuple[float | None, int, int]:
    """(Fleiss' κ over win/lose, items, raters per item) on the items none of whose raters said tie,
    keeping the items with the most common number of raters (at least two); κ None when undefined."""
    rows = [r for r in ratings if len(r) >= 2 and "tie" not in r]
    if not rows:
        return None, 0, 0
    n = Counter(len(r) for r in rows).most_common(1)[0][0]
    rows = [r for r in rows if len(r) == n]
    k = fleiss(rows, ["win", "lose"])
    return (None if math.isnan(k) else k), len(rows), n


def _kappa(pairs: list[tuple[str, str]], categories: list[str]) -> float | None:
    if not pairs:
        return None
    k = cohen([list(p) for p in pairs], categories)
    return None if math.isnan(k) else k


# ---------------------------------------------------------------------------------------------- agreement


def compare(votes: list[HumanVote], judgments: Iterable[Judgment],
            pair: tuple[str, str] | None = None) -> AgreementReport:
    """Agreement of the judge with the human majority over one method pair (default: the first vote's).

    Votes and judgments of other pairs are ignored; judgments are read oldest first, so the newest
    valid one per item counts."""
    if pair is None:
        if not votes:
            raise ValueError("no human votes: name the method pair")
        pair = votes[0].methods
    wanted = frozenset(pair)
    ref = pair[0]
    judged: dict[Key, Judgment] = {}
    for j in judgments:
        if frozenset((j.method_a, j.method_b)) == wanted and judge_favours(j) is not None:
            judged[(j.user_id, j.sample_id, j.topic_key, j.aspect, wanted)] = j
    mine = sorted((v for v in votes if frozenset(v.methods) == wanted),
                  key=lambda v: (v.user_id, v.sample_id, v.topic_key, v.aspect))
    report = AgreementReport(pair=pair, items=len(mine))
    both: list[tuple[str, str]] = []  # (judge, human) on matched items with a majority
    with_judge: list[list[str]] = []  # per matched item: the judge's and every annotator's rating
    humans: list[list[str]] = []  # per answered item: every annotator's rating
    for v in mine:
        human = None if v.majority is None else favoured_side(v.majority, ref)
        found = judged.get(v.key)
        favoured = judge_favours(found) if found is not None else None
        judge = None if favoured is None else favoured_side(favoured, ref)
        ratings = [favoured_side(x, ref) for x in v.votes.values()]
        counts = Counter(ratings)
        humans.append(ratings)
        report.rows.append({"user": v.user_id, "sample": v.sample_id, "topic": v.topic_key, "aspect": v.aspect,
                            "human": human or "split", "votes": " / ".join(f"{o} {counts[o]}" for o in OUTCOMES),
                            "annotators": len(v.votes), "judge": judge or "—",
                            "agree": None if judge is None or human is None else judge == human})
        if judge is None:
            report.unmatched += 1
            continue
        report.matched += 1
        report.judge_ties += judge == "tie"
        with_judge.append([judge, *ratings])
        if human is None:
            report.splits += 1
            continue
        report.human_ties += human == "tie"
        both.append((judge, human))
    report.unmatched_judgments = len(set(judged) - {v.key for v in mine})
    decided = [(j, h) for j, h in both if "tie" not in (j, h)]
    report.compared = len(decided)
    report.agreements = sum(j == h for j, h in decided)
    report.agreement_rate = report.agreements / report.compared if report.compared else None
    report.kappa = _kappa(decided, ["win", "lose"])
    report.kappa_all = _kappa(both, list(OUTCOMES))
    report.confusion = confusion_table(both)
    report.fleiss, report.fleiss_items, report.fleiss_raters = non_tie_fleiss(with_judge)
    report.fleiss_humans, report.fleiss_humans_items, _ = non_tie_fleiss(humans)
    return report


def calibration_votes(store: ReviewStore, dataset: str, pair: tuple[str, str]) -> list[HumanVote]:
    """The answers of this dataset's human-in-the-loop calibration batches of the method pair (either order)."""
    ids = [b["batch_id"] for b in store.batches() if b["task"] == "pairwise" and b["dataset"] == dataset
           and set((b["data"].get("calibration") or {}).get("methods", [])) == set(pair)]
    return pairwise_votes(store, list(reversed(ids))) if ids else []


def compare_by_aspect(votes: list[HumanVote], judgments: Iterable[Judgment],
                      pair: tuple[str, str] | None = None) -> dict[str, AgreementReport]:
    """One report per aspect that has human votes, in the order of :data:`ASPECTS`."""
    judgments = list(judgments)
    if pair is None and votes:
        pair = votes[0].methods
    return {aspect: compare([v for v in votes if v.aspect == aspect], [j for j in judgments if j.aspect == aspect],
                            pair)
            for aspect in ASPECTS if any(v.aspect == aspect for v in votes)}
