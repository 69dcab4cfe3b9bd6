"""Choosing the match threshold τ of an embedder on held-out pairs, with the ROC AUC and the match precision beside it.

Pairs come from a dataset's topics (history and query): a topic's gold requirement against each of its own
implicit needs and its user query is a **matched** pair (the same need, said another way — what a memory
statement that keeps the requirement looks like). Unmatched pairs, one of each kind per matched pair (drawn with a
seed): a need, query or requirement of a topic of **another user**, of the same user's topic of **another aspect**,
and — the **hard negative** — of another topic of the *same user and the same aspect* (a different need on the same
ground: the statement a memory that kept the topic but not the need would hold).

τ answers "is this the same need?", not "is this related?": it is the lowest threshold (a multiple of 0.005) at
which the **match precision** against hard negatives — matched pairs at or above τ over matched and hard-negative
pairs at or above it — reaches ``MIN_PRECISION`` (0.9) with at least ``MIN_HITS`` matched pairs above it, and at
most ``MAX_FPR`` (1 %) of the other-user and other-aspect pairs match (fidelity counts a gold statement kept when
*any* of the memory's statements reaches τ, so a small per-pair false-match rate still lets a large memory of
another user "recall" much of gold). An embedder for which no such τ exists **cannot tell needs apart**: its
calibration says so, its τ falls back to the other-user/other-aspect rule alone, and the judge matcher is the
default reading of its figures (:mod:`evaluation.fidelity.calibrated` names which embedders reach it).

Held out: every user is a fold — τ is chosen on the other users' pairs and the user's own pairs are scored with
it — and the reported TPR, FPR and match precision pool those held-out decisions. The ROC AUC (threshold-free: the
chance that a matched pair scores above an unmatched one) is over all pairs, and again over matched against hard
negatives alone.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from backends.embeddings import Embedder
from palset.dataset import User

MAX_FPR = 0.01  # share of other-user and other-aspect pairs allowed to match
MIN_PRECISION = 0.9  # matched pairs among the pairs called a match, against hard negatives
MIN_HITS = 10  # matched pairs a τ must keep for its precision to count (not three lucky pairs at the top)
HARD = "same aspect"  # the hard negative's kind


@dataclass(frozen=True)
class Pair:
    user: str
    a: str
    b: str
    matched: bool
    kind: str  # matched | other user | other aspect | same aspect (the hard negative)


class Fold(BaseModel):
    user: str
    tau: float  # chosen without this user's pairs
    precise: bool = True  # False: the precision rule found no τ on the other users' pairs (nothing matched)
    tpr: float | None
    fpr: float | None
    positives: int
    negatives: int


class ThresholdCalibration(BaseModel):
    embedder: str
    max_fpr: float = MAX_FPR
    min_precision: float = MIN_PRECISION
    users: list[str]
    tau: float  # the precision rule's where it reaches MIN_PRECISION held out; else the other-user/aspect rule's
    reaches: bool = False  # the precision rule reaches MIN_PRECISION against hard negatives on held-out users
    auc: float | None  # matched against other-user and other-aspect pairs
    hard_auc: float | None = None  # matched against hard negatives only
    tpr: float | None  # held out (pooled over folds), at the shipped rule's τ
    fpr: float | None  # other-user and other-aspect pairs
    match_precision: float | None = None  # held out, against hard negatives, at the shipped rule's τ
    precise_tau: float | None = None  # the precision rule's τ on all pairs (None: no τ reaches it)
    precise_precision: float | None = None  # held out, the precision rule's τ per fold
    precise_tpr: float | None = None
    best_precision: float | None = None  # the highest match precision any τ keeping MIN_HITS matched pairs gives
    best_precision_tau: float | None = None
    positives: int
    negatives: int  # other-user and other-aspect pairs
    hard_negatives: int = 0
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
    for tau in _grid(s, step):
        if float((s[~y] >= tau).mean()) <= max_fpr:
            return float(tau)
    return float(np.round(s.max() + step, 6))


def _grid(s: np.ndarray, step: float) -> np.ndarray:
    return np.round(np.arange(np.floor(s.min() / step) * step, s.max() + 2 * step, step), 6)


def match_precision(scores: Sequence[float] | np.ndarray, kinds: Sequence[str] | np.ndarray, tau: float) -> tuple[float | None, int]:
    """(matched pairs at or above τ over those and the hard negatives at or above it, matched pairs at or above)."""
    s, k = np.asarray(scores, dtype=float), np.asarray(kinds)
    hit = s >= tau
    tp, fp = int((hit & (k == "matched")).sum()), int((hit & (k == HARD)).sum())
    return (tp / (tp + fp) if tp + fp else None), tp


def best_precision(scores: Sequence[float] | np.ndarray, kinds: Sequence[str], min_hits: int = MIN_HITS,
                   step: float = 0.005) -> tuple[float | None, float | None]:
    """(the highest match precision a τ keeping at least ``min_hits`` matched pairs gives, that τ)."""
    s = np.asarray(scores, dtype=float)
    best: tuple[float | None, float | None] = (None, None)
    for tau in _grid(s, step) if s.size else []:
        p, tp = match_precision(s, kinds, float(tau))
        if p is not None and tp >= min_hits and (best[0] is None or p > best[0]):
            best = (p, float(tau))
    return best


def choose_precise_threshold(scores: Sequence[float] | np.ndarray, kinds: Sequence[str],
                             min_precision: float = MIN_PRECISION, max_fpr: float = MAX_FPR,
                             min_hits: int = MIN_HITS, step: float = 0.005) -> float | None:
    """The lowest τ (a multiple of ``step``) whose match precision against hard negatives is at least
    ``min_precision`` with at least ``min_hits`` matched pairs above it, and at which at most ``max_fpr`` of the
    easier unmatched pairs (other user, other aspect) match; None when no τ does (the embedder cannot tell needs of
    one ground apart)."""
    s, k = np.asarray(scores, dtype=float), np.asarray(kinds)
    if not (k == HARD).any():
        raise ValueError("no hard negatives (another topic of the same user and aspect) to choose a threshold on")
    easy = (k != "matched") & (k != HARD)
    for tau in _grid(s, step):
        p, tp = match_precision(s, k, float(tau))
        if p is not None and p >= min_precision and tp >= min_hits and \
                (not easy.any() or float((s[easy] >= tau).mean()) <= max_fpr):
            return float(tau)
    return None


def _texts(topic, with_requirement: bool = False) -> list[str]:
    """A topic's needs and query (the matched side), and its requirement too (the unmatched pool)."""
    t = topic.topic
    return [x for x in [*t.implicit_needs, t.user_query, *([t.requirement] if with_requirement else [])]
            if x and x.strip()]


def _aspect(topic) -> str | None:
    rid = topic.requirement_type_id
    return rid.split("-", 1)[0] if rid else None


def calibration_pairs(users: Sequence[User], seed: int = 0) -> list[Pair]:
    """Matched and unmatched pairs of the users' topics (one of each unmatched kind per matched pair; the hard
    negative only where the user has another topic of the same aspect with another requirement)."""
    rng, hard_rng = random.Random(seed), random.Random(f"{seed}:{HARD}")  # the hard draws leave the others' alone
    topics = {u.uid: [t for s in u.sessions for t in s.topics if t.topic.requirement] for u in users}
    out: list[Pair] = []
    for u in users:
        others = [x for v in users if v.uid != u.uid for t in topics[v.uid] for x in _texts(t, True)]
        for t in topics[u.uid]:
            req, aspect = t.topic.requirement, _aspect(t)
            away = [x for o in topics[u.uid] if aspect and _aspect(o) not in (None, aspect) for x in _texts(o, True)]
            near = [x for o in topics[u.uid] if aspect and _aspect(o) == aspect and o.topic.requirement != req
                    for x in _texts(o, True)]
            for text in _texts(t):
                out.append(Pair(u.uid, req, text, True, "matched"))
                if others:
                    out.append(Pair(u.uid, req, rng.choice(others), False, "other user"))
                if away:
                    out.append(Pair(u.uid, req, rng.choice(away), False, "other aspect"))
                if near:
                    out.append(Pair(u.uid, req, hard_rng.choice(near), False, HARD))
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


@dataclass(frozen=True)
class _HeldOut:
    """Every user's pairs decided with a τ chosen on the other users' pairs by one rule."""

    folds: list[Fold]
    hit: np.ndarray
    label: np.ndarray
    kind: np.ndarray

    def rate(self, kind: str) -> float | None:
        mask = self.kind == kind
        return float(self.hit[mask].mean()) if mask.any() else None

    def tpr(self) -> float | None:
        return float(self.hit[self.label].mean()) if self.label.any() else None

    def fpr(self, hard: bool = False) -> float | None:
        mask = ~self.label if hard else (~self.label) & (self.kind != HARD)
        return float(self.hit[mask].mean()) if mask.any() else None

    def precision(self) -> float | None:
        tp, fp = int((self.hit & self.label).sum()), int((self.hit & (self.kind == HARD)).sum())
        return tp / (tp + fp) if tp + fp else None


def _held_out(pairs: Sequence[Pair], scores: np.ndarray, rule: Callable[[np.ndarray, list[str]], float | None]
              ) -> _HeldOut:
    kinds = [p.kind for p in pairs]
    folds, hit, label, kind = [], [], [], []
    for uid in dict.fromkeys(p.user for p in pairs):
        train = [i for i, p in enumerate(pairs) if p.user != uid]
        test = [i for i, p in enumerate(pairs) if p.user == uid]
        train_kinds = [kinds[i] for i in train]
        if "matched" not in train_kinds or all(k == "matched" for k in train_kinds):
            continue
        tau = rule(scores[train], train_kinds)
        if tau is None:  # the rule finds no τ without this user: nothing is called a match
            tau = float("inf")
        labels = [pairs[i].matched for i in test]
        easy = [i for i in test if kinds[i] != HARD]  # a fold's FPR, as the pooled one, over the easier negatives
        tpr, fpr = rates(scores[easy], [pairs[i].matched for i in easy], tau)
        folds.append(Fold(user=uid, tau=min(tau, 1.0 + 1e-9), precise=tau != float("inf"), tpr=tpr, fpr=fpr,
                          positives=sum(labels), negatives=len(easy) - sum(labels)))
        hit += [bool(scores[i] >= tau) for i in test]
        label += labels
        kind += [kinds[i] for i in test]
    return _HeldOut(folds, np.array(hit, dtype=bool), np.array(label, dtype=bool), np.array(kind))


def calibrate(users: Sequence[User], embedder: Embedder, seed: int = 0) -> ThresholdCalibration:
    """τ for ``embedder`` on the users' pairs, with held-out rates and match precision (each user a fold) and the
    ROC AUC. Where the precision rule reaches ``MIN_PRECISION`` on held-out users, τ is its; otherwise τ is the
    other-user/other-aspect rule's, ``reaches`` is False, and the held-out precision of both rules is reported."""
    pairs = calibration_pairs(users, seed)
    if not any(p.matched for p in pairs) or all(p.matched for p in pairs):
        raise ValueError("threshold calibration needs topics with implicit needs in at least two users "
                         "(input.json) — and situation/situation.json for the other-aspect pairs")
    scores = pair_scores(pairs, embedder)
    labels, kinds = [p.matched for p in pairs], [p.kind for p in pairs]
    precise = _held_out(pairs, scores, _precise)
    reaches = bool(precise.folds) and all(f.precise for f in precise.folds) and \
        (precise.precision() or 0.0) >= MIN_PRECISION
    shipped = precise if reaches else _held_out(pairs, scores, _easy_threshold)
    tau = _precise(scores, kinds) if reaches else _easy_threshold(scores, kinds)
    easy = [i for i, k in enumerate(kinds) if k != HARD]
    hard = [i for i, k in enumerate(kinds) if k in ("matched", HARD)]
    best, best_tau = best_precision(scores, kinds)
    return ThresholdCalibration(
        embedder=embedder.name, users=list(dict.fromkeys(p.user for p in pairs)), tau=float(tau or 0.0),
        reaches=reaches, auc=roc_auc(scores[easy], [labels[i] for i in easy]),
        hard_auc=roc_auc(scores[hard], [labels[i] for i in hard]), tpr=shipped.tpr(), fpr=shipped.fpr(),
        match_precision=shipped.precision(), precise_tau=_precise(scores, kinds),
        precise_precision=precise.precision(), precise_tpr=precise.tpr(), best_precision=best,
        best_precision_tau=best_tau, positives=sum(labels), negatives=len(easy) - sum(labels),
        hard_negatives=kinds.count(HARD), by_kind={k: shipped.rate(k) for k in ("other user", "other aspect", HARD)},
        folds=shipped.folds)


def _precise(scores: np.ndarray, kinds: list[str]) -> float | None:
    return choose_precise_threshold(scores, kinds) if HARD in kinds else None


def _easy_threshold(scores: np.ndarray, kinds: list[str]) -> float:
    """The fallback τ: at most ``MAX_FPR`` of the other-user and other-aspect pairs match (hard negatives aside)."""
    keep = [i for i, k in enumerate(kinds) if k != HARD]
    return choose_threshold(scores[keep], [kinds[i] == "matched" for i in keep])
