"""The pure arithmetic of fidelity (no items, no embedder): grouping agreement, best matches above a
threshold, recall and precision, polarity errors. Each function is small enough to check by hand."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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
