"""FairEval figures of the bundled demo workspace, as a reviewer recomputes them (``faireval_summary`` v2 beside v1).

Per (method A, method B, aspect) of the stored judgments (the newest per topic and judge; a topic judged in both
directions once): win / tie / lose / invalid / dropped, FastChat's win_rate_adjusted with its 95% CI by a cluster
bootstrap over users and, beside it, v1's percentile bootstrap over judgments; position consistency, position-decided
wins/losses, the median score margin and the share by ≤ 0.5, orders with identical samples, and the temperatures
the judgments were sampled at.
Run: ``.venv/bin/python bench/faireval_figures.py`` (imports ``data/demo/workspace.palbundle`` into a temporary home).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PAL_HOME"] = tempfile.mkdtemp(prefix="pal-bench-")

from evaluation.aggregate import aggregate_judgments, bootstrap_ci  # noqa: E402
from evaluation.faireval_stats import POINTS, one_per_topic  # noqa: E402
from evaluation.service import dropped_topics  # noqa: E402
from palset.names import DEMO_PATH, configured_datasets  # noqa: E402
from studio.bundle.importer import import_bundle  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

DEMO_BUNDLE = DEMO_PATH / "workspace.palbundle"


def pct(value: float | None) -> str:
    return "  –  " if value is None else f"{value:5.0%}"


def main() -> None:
    if not DEMO_BUNDLE.is_file():
        print(f"{DEMO_BUNDLE} is missing: make demo-workspace")
        return
    with tempfile.TemporaryDirectory() as tmp:
        ws = make_workspace(Path(tmp) / "home", env={"PAL_EMBEDDER": "hash"})
        import_bundle(ws, DEMO_BUNDLE, known=configured_datasets())
        stored = ws.evals.judgments()
        dkey = next(iter({j.dataset for j in stored}), "")
        pairs = sorted({tuple(sorted((j.method_a, j.method_b))) for j in stored})
        temps = Counter(j.judge_temperature for j in stored)
        print(f"{len(stored)} stored judgments in {DEMO_BUNDLE.name}; sampled at temperature: "
              + ", ".join(f"{t}: {n}" for t, n in sorted(temps.items(), key=lambda x: str(x[0]))))
        print(f"{'A vs B':<30} {'aspect':<12} {'w/t/l/inv/drop':>16} {'adj.win':>7} {'cluster CI':>15} "
              f"{'v1 item CI':>15} {'users':>5} {'consist':>7} {'pos.dec':>8} {'margin':>6} {'≤0.5':>5} {'ident.':>7}")
        for a, b in pairs:
            shown = one_per_topic(stored, a, b)
            dropped = dropped_topics(ws.sims, dkey, a, b)
            for r in aggregate_judgments(shown, dropped=dropped):
                group = [j for j in shown if j.aspect == r["aspect"]]
                item = bootstrap_ci([POINTS[j.decision] for j in group if j.decision != "invalid"])
                lo, hi = r["adjusted_win_rate_ci"]
                counts = f"{r['win']}/{r['tie']}/{r['lose']}/{r['invalid']}/{r['dropped']}"
                decided = f"{r['position_decided']}/{r['decided']}"
                margin = "–" if r["median_margin_decided"] is None else f"{r['median_margin_decided']:.2f}"
                identical = f"{r['identical_orders']}/{r['orders_with_samples']}"
                cluster, items = f"[{lo:.2f}, {hi:.2f}]", f"[{item[0]:.2f}, {item[1]:.2f}]"
                print(f"{a + ' vs ' + b:<30} {r['aspect']:<12} {counts:>16} {r['win_rate_adjusted']:>7.3f} "
                      f"{cluster:>15} {items:>15} {r['users']:>5} {pct(r['position_consistency']):>7} "
                      f"{decided:>8} {margin:>6} {pct(r['thin_share']):>5} {identical:>7}")
        print("adj.win: (win + ½ tie) / decided (FastChat's win_rate_adjusted); cluster CI: users resampled (v2); "
              "v1 item CI: judgments resampled as if independent; consist: both orders name the same winner; "
              "pos.dec: wins/losses whose orders named opposite winners; margin: median |mean A − mean B| of "
              "wins/losses, ≤0.5 their share by at most half a point; ident.: orders whose k samples were identical")


if __name__ == "__main__":
    main()
