"""The fidelity leaderboard: per method, each headline figure of the last session measured, averaged over
users with a seeded percentile bootstrap CI over users (the same helper as the single-turn leaderboard)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from evaluation.aggregate import N_BOOT, bootstrap_ci
from evaluation.fidelity.types import HEADLINE, FidelityReport


def summarise(values: Sequence[float], *, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Mean, 95% bootstrap CI and n of the measurable values (None left out)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"value": None, "ci": [None, None], "n": 0}
    lo, hi = bootstrap_ci(vals, n_boot=n_boot, seed=seed)
    return {"value": float(np.mean(vals)), "ci": [lo, hi], "n": len(vals)}


def leaderboard(reports: Sequence[FidelityReport], *, n_boot: int = N_BOOT, seed: int = 0) -> list[dict]:
    """One row per (method, embedder, threshold): every headline figure with its CI over users, oracle first."""
    groups: dict[tuple[str, str, float], list[FidelityReport]] = defaultdict(list)
    for r in reports:
        if r.final is not None:
            groups[(r.method, r.embedder, r.threshold)].append(r)
    rows = []
    for (method, embedder, threshold), rs in groups.items():
        row = {"method": method, "oracle": rs[0].oracle, "embedder": embedder, "threshold": threshold,
               "users": sorted(r.user_id for r in rs), "layered": rs[0].layered}
        for name in HEADLINE:
            row[name] = summarise([getattr(r.final, name) for r in rs], n_boot=n_boot, seed=seed)
        rows.append(row)
    return sorted(rows, key=lambda r: (not r["oracle"], r["method"], r["embedder"], r["threshold"]))


def report_summary(report: FidelityReport) -> dict:
    """A report's last-session figures, flat (CLI and exports)."""
    final = report.final
    figures = {name: getattr(final, name) if final else None for name in HEADLINE}
    figures["background"] = dict(final.background) if final else {}
    return {"user": report.user_id, "method": report.method, "oracle": report.oracle, "build_id": report.build_id,
            "sessions": len(report.sessions), "as_of": final.sample_id if final else None, **figures,
            "misses": len(report.misses), "unavailable": report.unavailable, "seconds": report.seconds}
