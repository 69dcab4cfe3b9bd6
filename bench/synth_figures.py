"""Figures of one generation: LLM calls, tokens and seconds per synthesis step.

    .venv/bin/python bench/synth_figures.py RUN_ID        # a stored run (PAL_HOME/synth/RUN_ID)
    .venv/bin/python bench/synth_figures.py --generate --months 1 --lang en   # make a small user now
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from studio.workspace import Workspace
from synth.registry import NAMES


def show(ws: Workspace, run_id: str) -> None:
    from synth.pipeline import Pipeline

    pipe = Pipeline(run_id, ws.synth, calls=ws.runs)
    figures = ws.runs.by_prompt(run_id)
    print(f"{'step':<22}{'calls':>6}{'retries':>8}{'tok in':>9}{'tok out':>9}{'LLM s':>8}{'step s':>8}")
    for name in NAMES:
        rec = pipe.record(name)
        own = [f for prompt, f in figures.items() if prompt == f"synth/{name}" or prompt.startswith(f"synth/{name}_")]
        calls, tin, tout, secs = (sum(f[i] for f in own) for i in range(4))  # a step's repair prompts count with it
        print(f"{name:<22}{calls:>6}{rec.retries if rec else 0:>8}{tin:>9}{tout:>9}{secs:>8.1f}"
              f"{rec.seconds if rec else 0:>8.1f}")
    t = pipe.cost()
    print(f"total: {t.calls} calls, {t.tokens_in} tokens in, {t.tokens_out} out; status {pipe.info.status}")
    print("\n".join(pipe.report().lines()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_id", nargs="?")
    ap.add_argument("--generate", action="store_true")
    ap.add_argument("--months", type=int, default=1)
    ap.add_argument("--lang", default="en")
    args = ap.parse_args()
    ws = Workspace()
    if args.generate or not args.run_id:  # no run named: generate one (what `make bench` does)
        from synth.config import SynthConfig
        from synth.pipeline import Pipeline

        out = tempfile.mkdtemp(prefix="synth-bench-")
        pipe = Pipeline.create(SynthConfig(lang=args.lang, months=args.months), out, ws.synth, llm=ws.llm())
        pipe.run()
        args.run_id = pipe.run_id
    show(ws, args.run_id)


if __name__ == "__main__":
    main()
