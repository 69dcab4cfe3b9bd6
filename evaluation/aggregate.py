"""Aggregates over judged topics and bench results: counts, rates, seeded bootstrap CIs, per-user breakdowns,
judge-bias diagnostics, the topics dropped before judging, and the metric versions they were made with."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from backends.llm.structured_call import CUT
from evaluation.bias import length_bias, position_bias
from evaluation.faireval import Judgment, apply_decision
from evaluation.faireval_stats import outcome_summary, position_summary
from evaluation.tasks import TaskResult, g_report, s_report
from evaluation.versions import METRIC_VERSIONS, versions_text

if TYPE_CHECKING:
    from evaluation.service import DroppedTopic

N_BOOT = 2000


def bootstrap_ci(values: Sequence[float], stat: Callable[[np.ndarray], float] = np.mean, *, n_boot: int = N_BOOT,
                 seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of ``stat`` over items (topics), reproducible by seed; (nan, nan) when empty."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))
    # the mean (the default) in one vectorised pass, the same values as row by row; other statistics per row
    stats = arr[idx].mean(axis=1) if stat is np.mean else np.array([stat(arr[row]) for row in idx])
    alpha = (1 - level) / 2
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha))


def outcome_counts(decisions: Sequence[str]) -> dict[str, float]:
    """win/tie/lose counts, rates and the adjusted win rate (win + ½ tie) over valid decisions."""
    c = {d: sum(x == d for x in decisions) for d in ("win", "tie", "lose", "invalid")}
    n = c["win"] + c["tie"] + c["lose"]
    rates = {f"{d}_rate": (c[d] / n if n else 0.0) for d in ("win", "tie", "lose")}
    adjusted = (c["win"] + 0.5 * c["tie"]) / n if n else 0.0
    return {**c, "n": n, **rates, "adjusted_win_rate": adjusted}


def summarize_pair(judgments: Sequence[Judgment], *, n_boot: int = N_BOOT, seed: int = 0, dropped: int = 0) -> dict:
    """One (method A, method B, aspect) group: outcomes over decided and over all topics (``dropped`` ones too) with
    cluster-bootstrap CIs over users, the position figures, per-user outcomes, position and length bias
    (:mod:`evaluation.faireval_stats`)."""
    out: dict[str, Any] = outcome_summary(judgments, dropped, n_boot=n_boot, seed=seed)
    out.update(position_summary(judgments, n_boot=n_boot, seed=seed))
    by_user: dict[str, list[str]] = defaultdict(list)
    for j in judgments:
        by_user[j.user_id].append(j.decision)
    out["per_user"] = {u: outcome_counts(d) for u, d in sorted(by_user.items())}
    out.update(position_bias(judgments))
    out["length_bias"] = length_bias(judgments)
    out["invalid_samples"] = sum(j.invalid for j in judgments)
    out["cut_samples"] = sum(cut_samples(j) for j in judgments)
    out["samples"] = sum(len(j.samples) for j in judgments)
    return out


def cut_samples(j: Judgment) -> int:
    """Invalid samples of ``j`` whose last answer the endpoint stopped at the answer budget (max_tokens)."""
    return sum(1 for s in j.samples if not s.ok and s.errors and s.errors[-1].startswith(CUT))


def aggregate_judgments(judgments: Sequence[Judgment], threshold: float = 0.0, *, n_boot: int = N_BOOT,
                        seed: int = 0, dropped: Sequence[DroppedTopic] = ()) -> list[dict]:
    """Per (method A, method B, aspect): decisions recomputed with ``threshold``, then :func:`summarize_pair`;
    ``dropped`` (topics of the pair without two finished runs, see :func:`evaluation.service.dropped_topics`)
    is counted next to win/tie/lose/invalid."""
    groups: dict[tuple[str, str, str], list[Judgment]] = defaultdict(list)
    for j in judgments:
        groups[(j.method_a, j.method_b, j.aspect)].append(apply_decision(j, threshold))
    return [{"method_a": a, "method_b": b, "aspect": asp, "threshold": threshold,
             **summarize_pair(js, n_boot=n_boot, seed=seed,
                              dropped=sum(d.method_a == a and d.method_b == b for d in dropped)),
             "decision_version": METRIC_VERSIONS["faireval_decision"],
             "metric_versions": versions_text("faireval_decision", "faireval_summary", "length_bias")}
            for (a, b, asp), js in sorted(groups.items())]


def _metric(values: list[float], scale: Callable[[list], float], n_boot: int, seed: int) -> dict:
    lo, hi = bootstrap_ci(values, lambda a: scale(list(a)), n_boot=n_boot, seed=seed)
    return {"value": scale(values), "ci": [lo, hi], "n": len(values)}


def leaderboard(results: Sequence[TaskResult], *, n_boot: int = N_BOOT, seed: int = 0) -> list[dict]:
    """Per method: restatement BLEU-1…4 and G-score, proposal BLEU-1…4, S-score, each with a bootstrap CI;
    failed predictions per task and failed G-score judge calls (out of the G-score mean) are counted."""
    by_method: dict[str, dict[str, list[TaskResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        by_method[r.method][r.task].append(r)
    mean100 = lambda v: 100.0 * float(np.mean(v)) if len(v) else 0.0  # noqa: E731 — BLEU shown ×100
    rows = []
    for method, tasks in sorted(by_method.items()):
        row: dict = {"method": method}
        for task in ("restatement", "proposal"):
            rs = tasks.get(task, [])
            for n in (1, 2, 3, 4):
                row[f"{task}_bleu{n}"] = _metric([(r.bleu or {}).get(n, 0.0) for r in rs], mean100, n_boot, seed)
            row[f"{task}_invalid"] = sum(not r.ok for r in rs)
        restated = tasks.get("restatement", [])
        # a failed prediction scores 0 (the method failed); a failed judge call has no score and leaves the mean
        row["g_score"] = _metric([r.g_score or 0.0 for r in restated if r.g_ok is not False], g_report, n_boot, seed)
        row["g_judge_failed"] = sum(r.g_ok is False for r in restated)
        sel = tasks.get("selection", [])
        row["s_score"] = _metric([float(r.s_score or 0) for r in sel], s_report, n_boot, seed)
        row["selection_invalid"] = sum(not r.ok for r in sel)
        row["metric_versions"] = versions_text("bleu", "g_score", "s_score")
        rows.append(row)
    return rows
