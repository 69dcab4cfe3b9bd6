"""Memory figures: prompt tokens per query per method vs the full history (target: H²Memory and agentic
≤ 1/16), retrieval latency at PAL-Set scale, LLM calls per added session, and graph time-to-stable.

Run: ``.venv/bin/python bench/memory_figures.py [--real-home DIR]``. Methods without LLM steps are built
here on every demo user; LLM methods are read from builds made with the bundled model under
``--real-home`` (``PAL_HOME=DIR pal memory build --dataset data/demo --user 1000 --method h2memory``),
since building them takes minutes per session on CPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def token_ratios(home: Path, methods: list[str], users: list[str] | None) -> None:
    from palset.loader import load_dataset
    from studio.workspace import Workspace

    ws = Workspace(home)

    ds = load_dataset(ROOT / "data" / "demo")
    for method in methods:
        ratios, tokens, full = [], [], []
        for uid, user in ds.users.items():
            if users and uid not in users:
                continue
            builder = ws.open_builder(ds, uid, method)
            if builder.impl.uses_llm and len(builder.store.done_stages(builder.build_id)) < builder.total_stages:
                continue
            builder.run()
            for session in user.query:
                for topic in session.topics:
                    trace = builder.retrieve(topic.topic.user_query, "requirement", session)
                    tokens.append(trace.tokens)
                    full.append(trace.full_history_tokens)
                    ratios.append(trace.tokens / max(1, trace.full_history_tokens))
        if ratios:
            print(f"{method:>13}: {len(ratios)} query topics, prompt tokens median {statistics.median(tokens):.0f} vs "
                  f"full history {statistics.median(full):.0f} → ratio median {statistics.median(ratios):.3f} "
                  f"(1/{1 / max(statistics.median(ratios), 1e-9):.0f}), max {max(ratios):.3f}")
        else:
            print(f"{method:>13}: no complete build under {home}")


def llm_calls_per_session(home: Path) -> None:
    from studio.workspace import Workspace

    rows = Workspace(home).memory.stage_costs()
    per: dict[str, list[tuple[int, int, int, float]]] = {}
    for method, user, stage, calls, tin, tout, secs in rows:
        per.setdefault(method, [])
        if stage % 2 == 1:  # a session = its logs stage + its dialogue stage
            prev = next(r for r in rows if r[0] == method and r[1] == user and r[2] == stage - 1)
            per[method].append((calls + prev[3], tin + prev[4], tout + prev[5], secs + prev[6]))
    for method, sessions in per.items():
        if any(c for c, *_ in sessions):
            print(f"{method:>13}: {len(sessions)} sessions, LLM calls per added session median "
                  f"{statistics.median(c for c, *_ in sessions):.0f}, tokens in/out per session "
                  f"{statistics.median(t for _, t, _, _ in sessions):.0f}/{statistics.median(o for *_, o, _ in sessions):.0f}, "
                  f"CPU seconds per session with the bundled model {statistics.median(s for *_, s in sessions):.0f}")


def retrieval_at_scale(home: Path, repeats: int) -> None:
    from backends.config import ROLES
    from backends.llm.fake import ScriptedLLM
    from palset.loader import load_dataset
    from testkit.h2_fake import h2_reply
    from testkit.release import make_release
    from testkit.workspace import make_workspace

    root = make_release(home / "scale", users=1, sessions=29, logs_per_session=35, turns=14, topics=2, query_sessions=3)
    user = next(iter(load_dataset(root).users.values()))
    ws = make_workspace(home, dict.fromkeys(ROLES, ScriptedLLM(h2_reply)))
    for method in ("h2memory", "rag-turn"):
        b = ws.open_user_builder("scale", user, method, embedder="minilm")
        t0 = time.perf_counter()
        b.run()
        build = time.perf_counter() - t0
        lat = []
        for session in user.query:
            for topic in session.topics:
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    b.retrieve(topic.topic.user_query, "solution", session)
                    lat.append((time.perf_counter() - t0) * 1000)
        items = len(b.store.items_as_of(b.build_id, b.latest_stage()))
        print(f"{method:>13} at PAL-Set scale (29 sessions, {user.log_count} logs, {items} memory items; scripted "
              f"LLM, real MiniLM + Chroma; built in {build:.0f} s): retrieval p50 {statistics.median(lat):.0f} ms, "
              f"p95 {sorted(lat)[int(0.95 * len(lat))]:.0f} ms (incl. full-history token count)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--real-home", type=Path, default=Path("/tmp/pal-realbuild"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("== prompt tokens per query (requirement purpose, demo users' query topics)")
        token_ratios(Path(tmp) / "plain", ["vanilla-log", "rag-turn", "rag-session", "full-history"], None)
        if args.real_home.exists():
            token_ratios(args.real_home, ["h2memory", "agentic", "recursum", "memorybank"], None)
            print("== LLM calls per added session (bundled SmolLM2-135M, CPU)")
            llm_calls_per_session(args.real_home)
        print("== retrieval latency at PAL-Set scale")
        retrieval_at_scale(Path(tmp) / "scale", args.repeats)


if __name__ == "__main__":
    main()
