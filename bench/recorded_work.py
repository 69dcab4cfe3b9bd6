"""Figures of model work already done: every LLM call a PAL_HOME recorded, by kind of work.

Why: the bench pieces (``bench/model_throughput.py``, ``bench/live_chat.py``) measure short, fresh pieces of work;
a recording such as the demo workspace's (``make demo-workspace``, hours on 2 cores) is the long real work a lab
runs. Its call records keep, per call, the prompt tokens the server processed and served from its prompt cache
(where the endpoint says), output tokens, latency and attempts — so the seconds per call per step kind
and the share of prompt tokens served from the cache per kind of work can be read from it without
running a model again. (Whether a structured answer was valid is not on the call record — the call is recorded
before its answer is parsed; ``bench/model_quality.py`` counts JSON validity itself.)

Run: ``.venv/bin/python bench/recorded_work.py [--home .pal-demo] [--since EPOCH] [--csv]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from backends.paths import StatePaths  # noqa: E402  (the project root is on the path first)

WORK = {  # prompt name prefix → kind of work
    "memory/h2_": "H²Memory build",
    "sim/": "simulation",
    "eval/faireval_": "FairEval judgment",
    "synth/": "synthesis",
    "eval/sim_": "simulator fidelity",
}


def kind_of(prompt: str | None) -> str:
    """The kind of work a call belongs to, by its prompt's name."""
    return next((kind for prefix, kind in WORK.items() if (prompt or "").startswith(prefix)), "other")


@dataclass
class Figures:
    """One row: a kind of work (or one prompt of it) on one model."""

    calls: int = 0
    retried: int = 0  # calls the client made more than one attempt at (transport retries)
    prompt: int = 0
    cached: int = 0
    known: int = 0  # prompt tokens of calls whose endpoint said how many came from the cache
    output: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)

    def add(self, row: sqlite3.Row) -> None:
        self.calls += 1
        self.latencies.append(row["latency_ms"] / 1000)
        self.output += row["tokens_out"] or 0
        self.errors += 1 if row["error"] else 0
        self.retried += 1 if (row["attempts"] or 1) > 1 else 0
        if row["tokens_cached"] is not None and row["tokens_processed"] is not None:
            self.known += row["tokens_cached"] + row["tokens_processed"]
            self.cached += row["tokens_cached"]
        self.prompt += row["tokens_in"] or 0

    def cells(self) -> list[str]:
        lat = sorted(self.latencies) or [0.0]
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        share = lambda n, d: f"{100 * n / d:.0f} %" if d else "n/a"  # noqa: E731
        return [str(self.calls), str(self.retried), str(self.prompt), share(self.cached, self.known), str(self.output),
                f"{statistics.median(lat):.1f}", f"{p95:.1f}", str(self.errors)]


HEADER = ["calls", "retried", "prompt tok", "from cache", "output tok", "s p50", "s p95", "errors"]


def load_figures(db: Path, since: float = 0.0, by_prompt: bool = False) -> dict[tuple[str, str, str], Figures]:
    """(kind of work, model, prompt or "") → figures, from the ``llm_calls`` table of a runs database."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    rows = con.execute("SELECT * FROM llm_calls WHERE ts >= ? AND cache_hit = 0 ORDER BY ts", (since,)).fetchall()
    con.close()
    out: dict[tuple[str, str, str], Figures] = {}
    for row in rows:
        key = (kind_of(row["prompt_name"]), row["model"], (row["prompt_name"] or "") if by_prompt else "")
        out.setdefault(key, Figures()).add(row)
    return out


def render(figures: dict[tuple[str, str, str], Figures], csv: bool = False) -> str:
    head = ["work", "model", "prompt", *HEADER]
    rows = [[*key, *fig.cells()] for key, fig in sorted(figures.items())]
    if csv:
        return "\n".join(",".join(r) for r in [head, *rows])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in [head, *rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, default=ROOT / ".pal-demo", help="the PAL_HOME whose calls to read")
    ap.add_argument("--since", type=float, default=0.0, help="only calls from this UNIX time on")
    ap.add_argument("--csv", action="store_true")
    args = ap.parse_args(argv)
    db = StatePaths(args.home).runs_db
    if not db.exists():
        print(f"no runs database at {db}: nothing recorded there yet (make demo-workspace records one)")
        return 0
    print(f"LLM calls recorded in {db} (answers served from PAL Studio's response cache left out)\n")
    print(render(load_figures(db, args.since), args.csv))
    print()
    print(render(load_figures(db, args.since, by_prompt=True), args.csv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
