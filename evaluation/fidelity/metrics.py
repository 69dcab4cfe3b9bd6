"""The pure arithmetic of fidelity (no items, no embedder): grouping agreement on log pairs, best matches above a
threshold, recall, precision and F1, polarity errors. Each function is small enough to check by hand."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairTable:
    """Log pairs counted by whether gold and the method put the two logs in one group: ``same`` in both, gold
    ``gold_only``, the method ``method_only``, neither ``apart``."""

    same: int = 0
    gold_only: int = 0
    method_only: int = 0
    apart: int = 0

    @property
    def pairs(self) -> int:
        return self.same + self.gold_only + self.method_only + self.apart

    def __add__(self, other: PairTable) -> PairTable:
        return PairTable(self.same + other.same, self.gold_only + other.gold_only,
                         self.method_only + other.method_only, self.apart + other.apart)

    def __sub__(self, other: PairTable) -> PairTable:
        return PairTable(self.same - other.same, self.gold_only - other.gold_only,
                         self.method_only - other.method_only, self.apart - other.apart)

    def kappa(self) -> float | None:
        """Cohen's κ of the two "same group?" verdicts over the pairs (= the pairwise adjusted Rand index): 0 for
        any verdict that ignores the logs (all together, all apart, random), 1 for gold's. None when gold says the
        same of every pair (nothing to agree on beyond chance) or there are no pairs."""
        a, b, c, d = self.same, self.gold_only, self.method_only, self.apart
        if not (a + b) or not (c + d):  # gold never / always joins a pair
            return None
        denominator = (a + b) * (b + d) + (a + c) * (c + d)
        return 2.0 * (a * d - b * c) / denominator if denominator else None

    def merge_rate(self) -> float | None:
        """Share of the pairs the method joins (the error rate where gold joins none)."""
        return (self.same + self.method_only) / self.pairs if self.pairs else None


def _c2(n: int) -> int:
    return n * (n - 1) // 2


def pair_table(gold: Sequence[str], method: Sequence[str]) -> PairTable:
    """The pair table of two labelings of the same logs, by counting (no pair is enumerated)."""
    if len(gold) != len(method):
        raise ValueError(f"labelings differ in length: {len(gold)} gold, {len(method)} method")
    same = sum(_c2(n) for n in Counter(zip(gold, method)).values())
    gold_same = sum(_c2(n) for n in Counter(gold).values())
    method_same = sum(_c2(n) for n in Counter(method).values())
    total = _c2(len(gold))
    return PairTable(same, gold_same - same, method_same - same, total - gold_same - method_same + same)


def session_pairs(gold: Sequence[str], method: Sequence[str], sessions: Sequence[str]) -> tuple[PairTable, PairTable]:
    """(pairs within one session, pairs across sessions) of labelled logs, each with the session it came in."""
    within = PairTable()
    for sid in dict.fromkeys(sessions):
        idx = [i for i, s in enumerate(sessions) if s == sid]
        within = within + pair_table([gold[i] for i in idx], [method[i] for i in idx])
    return within, pair_table(gold, method) - within


def f1(recall: float | None, precision: float | None) -> float | None:
    """Harmonic mean; 0 when nothing is recalled, None when recall cannot be measured or precision is missing."""
    if recall is None:
        return None
    if recall == 0.0:
        return 0.0
    if precision is None:
        return None
    return 0.0 if recall + precision == 0 else 2 * recall * precision / (recall + precision)


def grouping_scores(gold: Sequence[str], method: Sequence[str]) -> tuple[float, float] | None:
    """(ARI, NMI) between two labelings of the same logs; None for no logs.

    ARI is chance-corrected (0 for a random grouping with the same group sizes, 1 for the same partition,
    negative when worse than chance); NMI uses the arithmetic mean of the entropies (scikit-learn's default).
    """
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    if len(gold) != len(method):
        raise ValueError(f"labelings differ in length: {len(gold)} gold, {len(method)} method")
    if not gold:
        return None
    return float(adjusted_rand_score(gold, method)), float(normalized_mutual_info_score(gold, method))


@dataclass(frozen=True)
class Matches:
    """For each gold row: the index of its best method column and that cosine (-1 and nan when no columns)."""

    index: np.ndarray
    score: np.ndarray

    def hits(self, threshold: float) -> np.ndarray:
        return np.nan_to_num(self.score, nan=-np.inf) >= threshold


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``a`` with every row of ``b`` (rows need not be normalised)."""
    if a.size == 0 or b.size == 0:
        return np.zeros((a.shape[0] if a.ndim == 2 else 0, b.shape[0] if b.ndim == 2 else 0), dtype=np.float32)
    na = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    nb = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return np.clip(na @ nb.T, -1.0, 1.0)


def best_matches(similarity: np.ndarray) -> Matches:
    """Best column per row (the first on a tie)."""
    rows = similarity.shape[0]
    if similarity.shape[1] == 0:
        return Matches(np.full(rows, -1), np.full(rows, np.nan))
    index = similarity.argmax(axis=1)
    return Matches(index, similarity[np.arange(rows), index])


def share(mask: np.ndarray) -> float | None:
    """Share of True in ``mask``; None when empty."""
    return float(mask.mean()) if mask.size else None


def recall(similarity: np.ndarray, threshold: float) -> float | None:
    """Share of gold rows whose best method match reaches ``threshold`` (None: no gold; 0 when no method rows)."""
    return share(best_matches(similarity).hits(threshold))


def precision(similarity: np.ndarray, threshold: float) -> float | None:
    """Share of method columns whose best gold match reaches ``threshold`` (None: the method states nothing)."""
    if similarity.shape[1] == 0:
        return None
    if similarity.shape[0] == 0:
        return 0.0
    return share(best_matches(similarity.T).hits(threshold))


def distinct(self_similarity: np.ndarray, threshold: float) -> np.ndarray:
    """Indices of a memory's distinct statements: in order, a statement that matches (cosine ≥ ``threshold``, the
    match decision itself) one already kept is a repeat of it and left out. Precision, grounding and noise count
    distinct statements only, so saying a thing five times — or five ways the matcher cannot tell apart — counts
    once."""
    n = self_similarity.shape[0]
    kept: list[int] = []
    for i in range(n):
        if not kept or float(self_similarity[i, kept].max()) < threshold:
            kept.append(i)
    return np.asarray(kept, dtype=int)


def mean_best(similarity: np.ndarray) -> float | None:
    """Mean best cosine over gold rows (threshold-free); 0 when the method has no rows."""
    if similarity.shape[0] == 0:
        return None
    if similarity.shape[1] == 0:
        return 0.0
    return float(similarity.max(axis=1).mean())


def polarity_flags(similarity: np.ndarray, gold: Sequence[str | None], method: Sequence[str | None],
                   threshold: float) -> np.ndarray:
    """For each gold row: its best match (at or above ``threshold``) states the opposite polarity.

    With several equally good matches, it is an error only when every one of them states the opposite
    polarity. Method statements without a stated polarity never make an error.
    """
    m = best_matches(similarity)
    out = np.zeros(len(gold), dtype=bool)
    for g, (score, hit) in enumerate(zip(m.score, m.hits(threshold))):
        if not hit or gold[g] is None:
            continue
        tied = [method[int(i)] for i in np.flatnonzero(similarity[g] >= score - 1e-6)]
        out[g] = all(p is not None and p != gold[g] for p in tied)
    return out


def polarity_errors(similarity: np.ndarray, gold: Sequence[str | None], method: Sequence[str | None],
                    threshold: float) -> int:
    """Gold preferences remembered with the opposite polarity: a liked thing as disliked, or the reverse."""
    return int(polarity_flags(similarity, gold, method, threshold).sum())
