"""Choosing the match threshold τ of an embedder on held-out pairs, with the ROC AUC beside it.

Pairs come from a dataset's topics (history and query): a topic's gold requirement against each of its own
implicit needs and its user query is a **matched** pair (the same need, said another way — what a memory
statement that keeps the requirement looks like); against a need, query or requirement of a topic of **another
user**, or of the same user's topic of **another aspect**, an **unmatched** pair (one of each per matched pair,
drawn with a seed) — the statements another user's memory, or another part of this one, would hold. A pair matches when its cosine is ≥ τ, and τ is the lowest threshold (a multiple of 0.005) at which at
most ``MAX_FPR`` (1 %) of the unmatched pairs match: fidelity counts a gold statement as kept when *any* of the
memory's statements reaches τ, so a per-pair false-match rate that looks small (Youden's J would pick one near
10 %) still lets a large memory of another user "recall" most of gold. What remains at memory level is what the
``ref:other-user`` reference row shows.

Held out: every user is a fold — τ is chosen on the other users' pairs and the user's own pairs are scored with
it — and the reported TPR/FPR pool those held-out decisions. The ROC AUC (threshold-free: the chance that a
matched pair scores above an unmatched one) is over all pairs. The shipped τ per embedder is in
:mod:`evaluation.fidelity.calibrated`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from backends.embeddings import Embedder
from palset.dataset import User

MAX_FPR = 0.01  # share of unmatched pairs allowed to match


@dataclass(frozen=True)
class Pair:
    user: str
    a: str
    b: str
    matched: bool
    kind: str  # matched | other user | other aspect


class Fold(BaseModel):
    user: str
    tau: float  # chosen without this user's pairs
    tpr: float | None
    fpr: float | None
    positives: int
    negatives: int


class ThresholdCalibration(BaseModel):
    embedder: str
    max_fpr: float = MAX_FPR
    users: list[str]
    tau: float
    auc: float | None
    tpr: float | None  # held out (pooled over folds)
    fpr: float | None
    positives: int
    negatives: int
    by_kind: dict[str, float | None]  # unmatched kind → held-out false-positive rate
    folds: list[Fold]


def roc_auc(scores: Sequence[float] | np.ndarray, labels: Sequence[bool]) -> float | None:
    """Probability that a matched pair scores above an unmatched one (ties count half); None without both."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if not pos or not neg:
        return None
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=float)
    sorted_s = s[order]
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def rates(scores: Sequence[float] | np.ndarray, labels: Sequence[bool], tau: float) -> tuple[float | None, float | None]:
    """(true-positive rate, false-positive rate) of "match when cosine ≥ τ"."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    hit = s >= tau
    tpr = float(hit[y].mean()) if y.any() else None
    fpr = float(hit[~y].mean()) if (~y).any() else None
    return tpr, fpr


def choose_threshold(scores: Sequence[float] | np.ndarray, labels: Sequence[bool], max_fpr: float = MAX_FPR,
                     step: float = 0.005) -> float:
    """The lowest τ (a multiple of ``step``) at which at most ``max_fpr`` of the unmatched pairs reach τ."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    if not (~y).any():
        raise ValueError("no unmatched pairs to choose a threshold on")
    for tau in np.round(np.arange(np.floor(s.min() / step) * step, s.max() + 2 * step, step), 6):
        if float((s[~y] >= tau).mean()) <= max_fpr:
            return float(tau)
    return float(np.round(s.max() + step, 6))


def _texts(topic, with_requirement: bool = False) -> list[str]:
    """A topic's needs and query (the matched side), and its requirement too (the unmatched pool)."""
    t = topic.topic
    return [x for x in [*t.implicit_needs, t.user_query, *([t.requirement] if with_requirement else [])]
            if x and x.strip()]


def _aspect(topic) -> str | None:
    rid = topic.requirement_type_id
    return rid.split("-", 1)[0] if rid else None


def calibration_pairs(users: Sequence[User], seed: int = 0) -> list[Pair]:
    """Matched and unmatched pairs of the users' topics (one of each unmatched kind per matched pair)."""
    rng = random.Random(seed)
    topics = {u.uid: [t for s in u.sessions for t in s.topics if t.topic.requirement] for u in users}
    out: list[Pair] = []
    for u in users:
        others = [x for v in users if v.uid != u.uid for t in topics[v.uid] for x in _texts(t, True)]
        for t in topics[u.uid]:
            req, aspect = t.topic.requirement, _aspect(t)
            away = [x for o in topics[u.uid] if aspect and _aspect(o) not in (None, aspect) for x in _texts(o, True)]
            for text in _texts(t):
                out.append(Pair(u.uid, req, text, True, "matched"))
                if others:
                    out.append(Pair(u.uid, req, rng.choice(others), False, "other user"))
                if away:
                    out.append(Pair(u.uid, req, rng.choice(away), False, "other aspect"))
    return out


def pair_scores(pairs: Sequence[Pair], embedder: Embedder) -> np.ndarray:
    """The cosine of each pair (documents on both sides, as fidelity embeds statements)."""
    texts = list(dict.fromkeys(x for p in pairs for x in (p.a, p.b)))
    if not texts:
        return np.zeros(0)
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    index = {t: i for i, t in enumerate(texts)}
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    a = unit[[index[p.a] for p in pairs]]
    b = unit[[index[p.b] for p in pairs]]
    return np.clip((a * b).sum(axis=1), -1.0, 1.0).astype(float)


def calibrate(users: Sequence[User], embedder: Embedder, seed: int = 0) -> ThresholdCalibration:
    """τ for ``embedder`` on the users' pairs, with held-out rates (each user a fold) and the ROC AUC."""
    pairs = calibration_pairs(users, seed)
    if not any(p.matched for p in pairs) or all(p.matched for p in pairs):
        raise ValueError("threshold calibration needs topics with implicit needs in at least two users "
                         "(input.json) — and situation/situation.json for the other-aspect pairs")
    scores = pair_scores(pairs, embedder)
    labels = [p.matched for p in pairs]
    folds, held_hit, held_label, held_kind = [], [], [], []
    for uid in dict.fromkeys(p.user for p in pairs):
        train = [i for i, p in enumerate(pairs) if p.user != uid]
        test = [i for i, p in enumerate(pairs) if p.user == uid]
        if not any(labels[i] for i in train) or all(labels[i] for i in train):
            continue
        tau = choose_threshold(scores[train], [labels[i] for i in train])
        tpr, fpr = rates(scores[test], [labels[i] for i in test], tau)
        folds.append(Fold(user=uid, tau=tau, tpr=tpr, fpr=fpr, positives=sum(labels[i] for i in test),
                          negatives=sum(not labels[i] for i in test)))
        held_hit += [bool(scores[i] >= tau) for i in test]
        held_label += [labels[i] for i in test]
        held_kind += [pairs[i].kind for i in test]
    hit, lab = np.array(held_hit, dtype=bool), np.array(held_label, dtype=bool)
    by_kind = {kind: (float(hit[[k == kind for k in held_kind]].mean()) if kind in held_kind else None)
               for kind in ("other user", "other aspect")}
    return ThresholdCalibration(
        embedder=embedder.name, users=list(dict.fromkeys(p.user for p in pairs)),
        tau=choose_threshold(scores, labels), auc=roc_auc(scores, labels),
        tpr=float(hit[lab].mean()) if lab.any() else None, fpr=float(hit[~lab].mean()) if (~lab).any() else None,
        positives=sum(labels), negatives=len(labels) - sum(labels), by_kind=by_kind, folds=folds)
