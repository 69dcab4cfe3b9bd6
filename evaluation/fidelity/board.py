"""The fidelity leaderboard: per method (and per reference memory), each headline figure at the last history session
measured, averaged over users with a seeded percentile bootstrap CI over users (the same helper as the
single-turn leaderboard). A figure a report cannot measure is left out of the average and, where no user has it,
shown as "n/a" with the reason; reports measured under an older definition form rows of their own, marked stale.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluation.aggregate import N_BOOT, bootstrap_ci
from evaluation.fidelity.references import REFERENCES, reference_label
from evaluation.fidelity.types import HEADLINE, FidelityReport

NA = "n/a"
ROW_ORDER = {name: i for i, name in enumerate(REFERENCES)}


def summarise(values: Sequence[float | None], *, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Mean, 95% bootstrap CI and n of the measurable values (None left out)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"value": None, "ci": [None, None], "n": 0}
    lo, hi = bootstrap_ci(vals, n_boot=n_boot, seed=seed)
    return {"value": float(np.mean(vals)), "ci": [lo, hi], "n": len(vals)}


def na_reason(report: FidelityReport, figure: str) -> str:
    """Why ``figure`` is not measured in ``report`` (its own reason, else its layer's)."""
    layer = figure.split("_", 1)[0]
    keys = [figure, layer]
    if figure.endswith(("_precision", "_grounded", "_noise", "_f1")):
        keys.append("precision")
    for key in keys:
        if key in report.unavailable:
            return report.unavailable[key]
    head = report.headline
    if head is None:
        return "no history session measured yet"
    counts = {"requirement": head.requirements, "preference": head.preferences, "situation": head.logs,
              "text": head.gold_statements}
    if counts.get(layer) == 0:
        return f"gold holds no {layer} statement as of {head.sample_id}"
    return "not measured in this report"


def not_measured(report: FidelityReport) -> dict[str, str]:
    """figure → reason, for every headline figure the report's headline session has no value for."""
    head = report.headline
    return {name: na_reason(report, name) for name in HEADLINE if head is None or getattr(head, name) is None}


def kind_of(method: str, oracle: bool) -> str:
    return "reference" if method in REFERENCES else "oracle" if oracle else "method"


def leaderboard(reports: Sequence[FidelityReport], *, n_boot: int = N_BOOT, seed: int = 0) -> list[dict]:
    """One row per (method or reference, embedder, threshold, metric version): every headline figure with its CI
    over users; references first (in :data:`REFERENCES` order), then the oracle, then methods."""
    groups: dict[tuple[str, str, float, str], list[FidelityReport]] = defaultdict(list)
    for r in reports:
        if r.headline is not None:
            groups[(r.method, r.embedder, r.threshold, r.metric_version)].append(r)
    rows = []
    for (method, embedder, threshold, version), rs in groups.items():
        row: dict[str, Any] = {"method": method, "label": reference_label(method), "kind": kind_of(method, rs[0].oracle),
               "oracle": rs[0].oracle, "embedder": embedder, "threshold": threshold,
               "threshold_source": rs[0].threshold_source, "threshold_auc": rs[0].threshold_auc,
               "match_precision": rs[0].match_precision, "default_matcher": rs[0].default_matcher,
               "users": sorted(r.user_id for r in rs), "layered": rs[0].layered, "metric_version": version,
               "stale": rs[0].stale,
               "as_of": sorted({r.headline.sample_id for r in rs if r.headline is not None}),
               "unfinished": sorted(r.user_id for r in rs if not r.headline_complete),
               "expect": REFERENCES[method].expect if method in REFERENCES else ""}
        missing: dict[str, str] = {}
        for name in HEADLINE:
            row[name] = cell_values = summarise([getattr(r.headline, name) for r in rs], n_boot=n_boot, seed=seed)
            if cell_values["value"] is None:
                missing[name] = na_reason(rs[0], name)
        row["not_measured"] = missing
        rows.append(row)
    return sorted(rows, key=lambda r: (r["kind"] != "reference", ROW_ORDER.get(r["method"], 99), not r["oracle"],
                                       r["stale"] is not None, r["method"], r["embedder"], r["threshold"]))


def cell(m: dict, digits: int = 3) -> str:
    """A leaderboard cell: "mean [CI low, CI high]", or "n/a"."""
    if m["value"] is None:
        return NA
    lo, hi = m["ci"]
    return f"{m['value']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def report_summary(report: FidelityReport) -> dict:
    """A report's headline figures, flat (CLI and exports): None where not measured, with the reason."""
    head = report.headline
    figures = {name: getattr(head, name) if head else None for name in HEADLINE}
    figures["background"] = dict(head.background) if head else {}
    return {"user": report.user_id, "method": report.method, "kind": kind_of(report.method, report.oracle),
            "oracle": report.oracle, "build_id": report.build_id, "sessions": len(report.sessions),
            "as_of": head.sample_id if head else None, "headline_complete": report.headline_complete, **figures,
            "not_measured": not_measured(report), "misses": len(report.misses), "unavailable": report.unavailable,
            "metric_version": report.metric_version, "stale": report.stale, "seconds": report.seconds}
