"""FairEval figures a reviewer asks for: intervals that respect how the judgments were drawn, every topic in the
denominator, and how much of a result the judge's position preference decided.

**Observations.** One judgment — both orders of one (user, topic, aspect) — is one observation: its k samples per
order are evidence for one verdict, never separate rows. A topic judged in both directions ((A, B) and (B, A)) is
one observation too (:func:`one_per_topic` keeps the newest, mirrored to the board's side).

**Intervals.** Users differ in how many topics they contribute (one user may hold a fifth of a board), and topics
of one user share a memory, a profile and a simulator: the bootstrap resamples *users* with replacement and takes
the ratio of the resampled sums (:func:`cluster_bootstrap`), so a board dominated by a few users gets the wide
interval it deserves. The point estimate is the plain ratio over all judgments. With fewer than :data:`FEW_USERS`
users the resamples are too few to cover as they say, and the row says so (``ci_note``).

**Denominators.** win / tie / lose rates are over decided topics, as the sources report them; beside them every
outcome's share of *all* topics of the pair — invalid judgments (no valid sample in an order) and dropped topics
(no finished run of both methods) included — so a failing method cannot look better by failing.

**Win rate with ties as half** is FastChat's ``win_rate_adjusted`` (``show_result.py``:
``(win + 0.5 * tie) / (win + lose + tie)``), shown beside win / tie / lose.

**Position.** Per judgment (:func:`judgment_position`): whether its two orders name the same winner (position
consistency), the score margin |mean A − mean B| on the judge's 1–10 scale, and whether it is *position-decided*:
a win or loss whose two orders named opposite winners — each order preferred the same slot, and the verdict is
whichever slot preference was the larger. Headline shares: consistent judgments of the valid ones, position-decided
and thin (margin ≤ :data:`THIN_MARGIN`) of the decided ones, and orders whose k valid samples were all identical
(k = 3 at temperature 0 costs three calls for one).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluation.faireval import JudgeSample, Judgment, apply_decision

N_BOOT = 2000
FEW_USERS = 10  # below this many users a cluster bootstrap has too few distinct resamples to cover as it says
THIN_MARGIN = 0.5  # a win or loss by at most half a point of the 1–10 scale is thin
POINTS = {"win": 1.0, "tie": 0.5, "lose": 0.0}
OUTCOMES = ("win", "tie", "lose", "invalid", "dropped")


def cluster_bootstrap(clusters: Sequence[Sequence[float]], *, n_boot: int = N_BOOT, seed: int = 0,
                      level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of the pooled mean ``sum(values) / count(values)`` when whole clusters (users) are resampled
    with replacement; a replicate that drew only empty clusters is left out. (nan, nan) without any value."""
    sums = np.array([float(sum(c)) for c in clusters])
    counts = np.array([len(c) for c in clusters], dtype=float)
    if counts.sum() == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(clusters), size=(n_boot, len(clusters)))
    num, den = sums[idx].sum(axis=1), counts[idx].sum(axis=1)
    stats = num[den > 0] / den[den > 0]
    alpha = (1 - level) / 2
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha))


def by_user(judgments: Sequence[Judgment], value) -> list[list[float]]:
    """Per user (sorted), ``value(j)`` of each valid judgment (``value`` None: left out)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for j in judgments:
        groups.setdefault(j.user_id, [])
        if j.decision != "invalid" and (v := value(j)) is not None:
            groups[j.user_id].append(float(v))
    return [groups[u] for u in sorted(groups)]


def mirrored(j: Judgment) -> Judgment:
    """``j`` seen from B's side: methods, runs and scores swapped, order 1 ↔ 2 (order 1 shows the first-named
    method first), decision and diagnostics recomputed; the stored record is not touched."""
    samples = [s.model_copy(update={"order": 2 if s.order == 1 else 1, "score_a": s.score_b, "score_b": s.score_a})
               for s in j.samples]
    samples.sort(key=lambda s: (s.order, s.index))
    flipped = j.model_copy(update={
        "method_a": j.method_b, "method_b": j.method_a, "run_a": j.run_b, "run_b": j.run_a, "samples": samples,
        "texts": {"order1": j.texts["order2"], "order2": j.texts["order1"]} if len(j.texts) == 2 else j.texts,
        "prompt_tokens": {"order1": j.prompt_tokens.get("order2", 0), "order2": j.prompt_tokens.get("order1", 0)}
        if j.prompt_tokens else {}})
    return apply_decision(flipped, j.threshold)


def one_per_topic(judgments: Sequence[Judgment], a: str, b: str) -> list[Judgment]:
    """One observation per (user, sample, topic, aspect) and judge model of the pair ``a``/``b``, from A's side:
    judgments made as (B, A) are mirrored; of several, the newest (``created_at``) counts."""
    newest: dict[tuple[str, str, str, str, str], Judgment] = {}
    for j in judgments:
        if {j.method_a, j.method_b} != {a, b}:
            continue
        seen = j if j.method_a == a else mirrored(j)
        key = (j.user_id, j.sample_id, j.topic_key, j.aspect, j.judge_model)
        if key not in newest or seen.created_at >= newest[key].created_at:
            newest[key] = seen
    return sorted(newest.values(), key=lambda j: (j.user_id, j.sample_id, j.topic_key, j.aspect))


def judgment_position(j: Judgment) -> dict[str, Any]:
    """``position_consistent`` (both orders name the same winner; None without a winner in both), ``score_margin``
    (|mean A − mean B|; None when invalid) and ``position_decided`` (a win or loss whose orders named opposite
    winners) — the names the judgments export uses."""
    both = "none" not in (j.order1_winner, j.order2_winner)
    margin = abs(j.mean_a - j.mean_b) if j.mean_a is not None and j.mean_b is not None else None
    return {"position_consistent": (j.order1_winner == j.order2_winner) if both else None, "score_margin": margin,
            "position_decided": j.decision in ("win", "lose") and {j.order1_winner, j.order2_winner} == {"A", "B"}}


def identical_orders(samples: Sequence[JudgeSample]) -> tuple[int, int]:
    """(orders whose ≥ 2 valid samples all gave the same two scores, orders with ≥ 2 valid samples)."""
    same = total = 0
    for order in (1, 2):
        scores = {(s.slot1, s.slot2) for s in samples if s.ok and s.order == order}
        n = sum(1 for s in samples if s.ok and s.order == order)
        if n >= 2:
            total += 1
            same += len(scores) == 1
    return same, total


def _share(hits: int, of: int) -> float | None:
    return hits / of if of else None


def position_summary(judgments: Sequence[Judgment], *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """The headline position figures with cluster-bootstrap CIs (see the module docstring)."""
    figures = [(j, judgment_position(j)) for j in judgments]
    both = [p["position_consistent"] for _, p in figures if p["position_consistent"] is not None]
    decided = [p for j, p in figures if j.decision in ("win", "lose")]
    margins = [p["score_margin"] for _, p in figures if p["score_margin"] is not None]
    same, orders = (sum(x) for x in zip(*(identical_orders(j.samples) for j in judgments))) if judgments else (0, 0)
    pos = {id(j): p for j, p in figures}
    decided_only = [j for j in judgments if j.decision in ("win", "lose")]
    return {
        "position_consistency": _share(sum(both), len(both)), "position_consistency_n": len(both),
        "position_consistency_ci": list(cluster_bootstrap(
            by_user(judgments, lambda j: pos[id(j)]["position_consistent"]), n_boot=n_boot, seed=seed)),
        "position_decided_share": _share(sum(p["position_decided"] for p in decided), len(decided)),
        "position_decided": sum(p["position_decided"] for p in decided), "decided": len(decided),
        "position_decided_ci": list(cluster_bootstrap(
            by_user(decided_only, lambda j: pos[id(j)]["position_decided"]), n_boot=n_boot, seed=seed)),
        "mean_margin": float(np.mean(margins)) if margins else None,
        "median_margin_decided": float(np.median([p["score_margin"] for p in decided])) if decided else None,
        "thin_share": _share(sum(p["score_margin"] <= THIN_MARGIN for p in decided), len(decided)),
        "identical_orders": same, "orders_with_samples": orders,
    }


def outcome_summary(judgments: Sequence[Judgment], dropped: int = 0, *, n_boot: int = N_BOOT,
                    seed: int = 0) -> dict[str, Any]:
    """win / tie / lose over decided topics, FastChat's ``win_rate_adjusted``, each outcome's share of all topics
    (invalid and dropped included), and cluster-bootstrap CIs over users for the rates."""
    counts = {d: sum(j.decision == d for j in judgments) for d in ("win", "tie", "lose", "invalid")}
    counts["dropped"] = dropped
    n = counts["win"] + counts["tie"] + counts["lose"]
    topics = n + counts["invalid"] + dropped
    out: dict[str, Any] = {**counts, "n": n, "topics": topics,
                           **{f"{d}_rate": (counts[d] / n if n else 0.0) for d in ("win", "tie", "lose")},
                           "win_rate_adjusted": (counts["win"] + 0.5 * counts["tie"]) / n if n else 0.0,
                           **{f"{d}_share_all": _share(counts[d], topics) for d in OUTCOMES}}
    out["adjusted_win_rate"] = out["win_rate_adjusted"]  # the name earlier exports used
    out["adjusted_win_rate_ci"] = list(cluster_bootstrap(by_user(judgments, lambda j: POINTS[j.decision]),
                                                         n_boot=n_boot, seed=seed))
    for d in ("win", "tie", "lose"):
        out[f"{d}_rate_ci"] = list(cluster_bootstrap(by_user(judgments, lambda j, d=d: float(j.decision == d)),
                                                     n_boot=n_boot, seed=seed))
    out["users"] = len({j.user_id for j in judgments})
    out["ci_method"] = "cluster bootstrap over users (percentile, 95%)"
    out["ci_note"] = (f"only {out['users']} user(s): a bootstrap over so few clusters understates the uncertainty; "
                      "read the interval as a lower bound on it" if out["users"] < FEW_USERS else "")
    return out
