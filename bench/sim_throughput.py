"""Batch simulation throughput vs concurrency (1, 2, 4, 8) against a real local HTTP server.

The server answers every chat completion (JSON for the user simulator, SSE for the streaming assistant)
after a fixed latency, so the ideal wall time of a batch is calls × latency / concurrency. Reported per
level: runs, utterances, wall time, runs/s, the platform's overhead over the server's latency
(wall × concurrency / (calls × latency) − 1; it includes workers left idle while the last runs finish),
the same over the workers' busy time only (Σ run seconds / (calls × latency) − 1: the per-call cost of
the platform itself) and the speedup over concurrency 1.

Targets (simulation issue): overhead ≤ 5%, speedup ≥ 6× at concurrency 8.
Run: ``.venv/bin/python bench/sim_throughput.py`` (a few minutes; temporary PAL_HOME; every level uses its own
seed, so nothing is answered from the response cache).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PAL_HOME"] = tempfile.mkdtemp(prefix="pal-bench-")
os.environ["PAL_EMBEDDER"] = "hash"  # vanilla-log embeds nothing: don't load a real model

from palset.loader import load_dataset  # noqa: E402
from sim.batch import plan_runs, run_batch  # noqa: E402
from testkit.latency_server import LatencyServer  # noqa: E402
from testkit.release import make_release  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402


def level(dataset, ws, latency: float, concurrency: int, seed: str) -> dict:
    """One batch at ``concurrency`` with its own seed (fresh run ids: no cache hits)."""
    specs = plan_runs(dataset, ["vanilla-log"], seed=seed)
    busy: list[float] = []
    summary = run_batch(ws, dataset, specs, ws.llm, concurrency,
                        progress=lambda done, total, outcome: busy.append(outcome.seconds))
    assert summary.failed == 0 and summary.cache_hits == 0, summary
    calls, wall = summary.llm_calls, summary.wall_seconds  # every answer well-formed: one request per call
    return {"concurrency": concurrency, "runs": summary.finished, "utterances": summary.utterances_written,
            "calls": calls, "wall": wall, "runs_per_s": summary.finished / wall,
            "overhead": wall * concurrency / (calls * latency) - 1,
            "busy_overhead": sum(busy) / (calls * latency) - 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=32, help="filler users (2 query topics each = 2 runs each; fewer runs per worker make the idle tail at the end a larger share of the wall time)")
    parser.add_argument("--latency", type=float, default=0.2, help="server seconds per call")
    parser.add_argument("--levels", default="1,2,4,8")
    args = parser.parse_args()
    root = make_release(Path(os.environ["PAL_HOME"]) / "ds", users=args.users, sessions=3, logs_per_session=8,
                        turns=8, query_sessions=1)
    dataset = load_dataset(root)
    base_url = LatencyServer.in_process(args.latency)
    ws = make_workspace(Path(os.environ["PAL_HOME"]), env={
        "PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": base_url, "PAL_DEFAULT_MODEL": "bench",
        "PAL_DEFAULT_STRUCTURED_MODE": "prompt", "PAL_EMBEDDER": os.environ["PAL_EMBEDDER"]})
    run_batch(ws, dataset, plan_runs(dataset, ["vanilla-log"], users=[next(iter(dataset.users))], seed="warm-up")[:1],
              ws.llm, 1)  # imports, Chroma client, memory build: not part of the figures
    print(f"vanilla-log on {args.users} filler users, server latency {args.latency * 1000:.0f} ms per call "
          "(targets: overhead <= 5%, speedup >= 6x at 8)")
    print(f"{'conc':>4} {'runs':>5} {'utt':>5} {'calls':>6} {'wall s':>7} {'runs/s':>7} {'overhead':>9} {'busy ovh':>9} "
          f"{'speedup':>8}")
    base = None
    for c in (int(x) for x in args.levels.split(",")):
        r = level(dataset, ws, args.latency, c, seed=f"bench-{c}-{time.time_ns()}")
        base = base or r["wall"] * (1 if c == 1 else c)  # speedup vs concurrency 1 (estimated if 1 is skipped)
        print(f"{c:>4} {r['runs']:>5} {r['utterances']:>5} {r['calls']:>6} {r['wall']:>7.1f} {r['runs_per_s']:>7.2f} "
              f"{r['overhead']:>8.1%} {r['busy_overhead']:>8.1%} {base / r['wall']:>7.1f}x", flush=True)


if __name__ == "__main__":
    main()
