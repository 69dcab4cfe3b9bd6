"""``pal judge`` (FairEval pairwise judging of simulated runs) and ``pal bench-tasks`` (single-turn tasks)."""

from __future__ import annotations

import argparse
import json
import sys

from cli.context import open_workspace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("judge", help="FairEval: judge finished runs of one method against a baseline, topic by "
                                     "topic (re-running the same command resumes)")
    p.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout")
    p.add_argument("--runs", required=True, metavar="METHOD_A", help="the method under test")
    p.add_argument("--baseline", required=True, metavar="METHOD_B", help="the method it is compared with")
    p.add_argument("--users", help="comma-separated user ids (default: every user with paired runs)")
    p.add_argument("--k", type=int, default=3, help="judge samples per order (default 3, as the paper)")
    p.add_argument("--threshold", type=float, default=0.0,
                   help="tie when the mean scores differ by at most this (default 0: exact equality)")
    p.add_argument("--aspects", default="requirement,preference", help="comma-separated: requirement, preference")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--concurrency", type=int, default=1, help="judgments in parallel (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_judge)

    b = sub.add_parser("bench-tasks", help="PAL-Bench single-turn tasks (restatement, proposal, selection) per method")
    b.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout")
    b.add_argument("--methods", required=True, help="comma-separated memory methods")
    b.add_argument("--users", help="comma-separated user ids (default: every user)")
    b.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    b.add_argument("--concurrency", type=int, default=1, help="topics in parallel (default 1)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench)


def make_llm():
    """The LLM client for a command (tests replace this)."""
    return open_workspace().llm(session_id="cli-eval")


def _split(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def _dataset(path: str):
    from palset.loader import load_dataset

    dataset = load_dataset(path, lazy=True)
    if not dataset.users:
        raise SystemExit(f"error: {path}: no users ({'; '.join(str(p) for p in dataset.problems[:3])})")
    return dataset


def cmd_judge(args: argparse.Namespace) -> int:
    from evaluation.aggregate import aggregate_judgments
    from evaluation.faireval import ASPECTS
    from evaluation.service import pair_runs
    from palset.dataset import dataset_key

    aspects = _split(args.aspects)
    if not aspects or any(a not in ASPECTS for a in aspects) or args.k < 1 or args.threshold < 0:
        print(f"error: --aspects must name {', '.join(ASPECTS)}; --k ≥ 1; --threshold ≥ 0", file=sys.stderr)
        return 2
    dataset = _dataset(args.dataset)
    ws = open_workspace()
    sims = ws.sims
    pairs = pair_runs(sims, dataset_key(dataset.root), args.runs, args.baseline, _split(args.users) or None)
    if not pairs:
        print(f"error: no topic has finished runs of both {args.runs} and {args.baseline}", file=sys.stderr)
        return 2
    print(f"judging {len(pairs)} topic(s) × {len(aspects)} aspect(s), k={args.k} per order", file=sys.stderr)
    try:
        judgments = _judge(ws, dataset, pairs, aspects, args)
    except KeyboardInterrupt:
        print("interrupted: finished judgments are saved; run the same command again to resume", file=sys.stderr)
        return 130
    rows = aggregate_judgments(judgments, args.threshold, seed=args.seed)
    print(json.dumps(rows, ensure_ascii=False, indent=1) if args.json else _judge_table(rows))
    return 0


def _judge(ws, dataset, pairs, aspects, args):
    """One ``eval.judge`` unit per (pair, aspect), run here; judgments already stored are loaded, not redone."""
    import uuid

    from cli.jobs_out import Counter, run_job, unit_env
    from jobs.types import JobSpec
    from protocol.units import judge_units

    specs = [(ws.sims.load(p.run_a).spec, ws.sims.load(p.run_b).spec) for p in pairs]
    units = judge_units(dataset, specs, aspects, args.k, args.threshold)
    job = JobSpec(job_id=f"judge-{uuid.uuid4().hex[:12]}", kind="judge", title=f"judge {args.runs} vs {args.baseline}",
                  created_by="cli", pool="cli", units=units)
    summary = run_job(ws, job, unit_env(ws, make_llm(), Counter(len(units))), args.concurrency)
    if summary.status != "done":
        raise SystemExit("error: " + "; ".join(summary.errors or [summary.status]))
    return [ws.evals.load_judgment(u.result["judgment_key"]) for u in ws.jobs.store.units(job.job_id)]


def _judge_table(rows: list[dict]) -> str:
    lines = [f"{'A vs B':<34} {'aspect':<12} {'win':>4} {'tie':>4} {'lose':>4} {'adj.win':>8} {'95% CI':>15} "
             f"{'flip':>5} {'slot1':>6} {'inv':>4}"]
    for r in rows:
        lo, hi = r["adjusted_win_rate_ci"]
        lines.append(f"{r['method_a'] + ' vs ' + r['method_b']:<34} {r['aspect']:<12} {r['win']:>4} {r['tie']:>4} "
                     f"{r['lose']:>4} {r['adjusted_win_rate']:>8.3f} {f'[{lo:.3f}, {hi:.3f}]':>15} "
                     f"{r['flip_rate']:>5.2f} {r['slot1_win_rate']:>6.2f} {r['invalid_samples']:>4}")
    return "\n".join(lines)


def cmd_bench(args: argparse.Namespace) -> int:
    from evaluation.aggregate import leaderboard
    from memory.methods import METHODS

    methods = _split(args.methods)
    unknown = [m for m in methods if m not in METHODS]
    if not methods or unknown:
        print(f"error: unknown method(s) {unknown} (methods: {', '.join(METHODS)})", file=sys.stderr)
        return 2
    dataset = _dataset(args.dataset)
    users = _split(args.users) or None
    missing = [u for u in users or [] if u not in dataset.users]
    if missing:
        print(f"error: no user(s) {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        results = _bench(open_workspace(), dataset, methods, users, args.concurrency)
    except KeyboardInterrupt:
        print("interrupted: finished results are saved; run the same command again to resume", file=sys.stderr)
        return 130
    rows = leaderboard(results, seed=args.seed)
    print(json.dumps(rows, ensure_ascii=False, indent=1) if args.json else _bench_table(rows))
    return 0


def _bench(ws, dataset, methods, users, concurrency: int):
    """Build units for the memories, then one ``eval.tasks`` unit per (method, query topic), run here."""
    import uuid

    from cli.jobs_out import Counter, run_job, unit_env
    from evaluation.service import query_topics
    from evaluation.tasks import TASKS
    from jobs.types import JobSpec
    from protocol.units import task_units

    units = task_units(dataset, query_topics(dataset, users), methods, list(TASKS))
    tasks = [u for u in units if u.kind == "eval.tasks"]
    job = JobSpec(job_id=f"bench-{uuid.uuid4().hex[:12]}", kind="bench-tasks", title=f"tasks {', '.join(methods)}",
                  created_by="cli", pool="cli", units=units)
    summary = run_job(ws, job, unit_env(ws, make_llm(), Counter(len(tasks))), concurrency)
    if summary.status != "done":
        raise SystemExit("error: " + "; ".join(summary.errors or [summary.status]))
    keys = [k for u in ws.jobs.store.units(job.job_id) if u.kind == "eval.tasks" for k in u.result["results"]]
    return [r for k in keys if (r := ws.evals.get_result(k)) is not None]


def _cell(m: dict) -> str:
    return f"{m['value']:.1f} [{m['ci'][0]:.1f},{m['ci'][1]:.1f}]"


def _bench_table(rows: list[dict]) -> str:
    cols = [("R-B1", "restatement_bleu1"), ("R-B2", "restatement_bleu2"), ("R-B3", "restatement_bleu3"),
            ("R-B4", "restatement_bleu4"), ("G", "g_score"), ("P-B1", "proposal_bleu1"), ("P-B2", "proposal_bleu2"),
            ("P-B3", "proposal_bleu3"), ("P-B4", "proposal_bleu4"), ("S", "s_score")]
    lines = ["method".ljust(14) + "".join(f"{name:>21}" for name, _ in cols)]
    for r in rows:
        lines.append(r["method"].ljust(14) + "".join(f"{_cell(r[key]):>21}" for _, key in cols))
    lines.append("BLEU ×100 (restatement R-, proposal P-), G-score 0–100, S-score −100–100; 95% bootstrap CIs over topics")
    return "\n".join(lines)
