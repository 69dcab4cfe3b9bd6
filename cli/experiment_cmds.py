"""``pal experiment plan | run | report FILE``: the paper's protocol as one declarative, resumable experiment."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="plan, run (resumable) and report a declarative experiment (TOML)")
    esub = p.add_subparsers(dest="experiment_command", required=True)
    plan = esub.add_parser("plan", help="the units and, per task and method, calls, tokens, cost and time")
    plan.add_argument("file")
    plan.add_argument("--json", action="store_true")
    plan.set_defaults(func=cmd_plan)
    run = esub.add_parser("run", help="run every unit not finished yet (re-running continues)")
    run.add_argument("file")
    run.add_argument("--concurrency", type=int, help="units in parallel (default: the file's)")
    run.add_argument("--executor", choices=["threads", "ray"], default="threads")
    run.add_argument("--address", help="Ray cluster address, e.g. ray://head:10001 or head:6379 (default: "
                                        "RAY_ADDRESS, else a Ray instance started here)")
    run.add_argument("--cpus-per-unit", type=float, help="the CPU share a unit asks Ray for (default 0.25: units "
                                                         "mostly wait on endpoints; PAL_RAY_CPUS_PER_UNIT)")
    run.set_defaults(func=cmd_run)
    rep = esub.add_parser("report", help="the paper's tables from the experiment's records")
    rep.add_argument("file")
    rep.add_argument("--format", choices=["markdown", "csv", "latex"], default="markdown")
    rep.add_argument("--out", help="write to this file instead of stdout")
    rep.set_defaults(func=cmd_report)


def _load(path: str):
    """(experiment, dataset, workspace under the experiment's configuration) or SystemExit(2) with the reason."""
    from cli.context import open_workspace
    from protocol.config import ExperimentError, load_experiment

    try:
        exp = load_experiment(path)
        ws = open_workspace()
        view = ws.configured(exp.job_config())
        dataset = ws.dataset(exp.dataset)
    except (ExperimentError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    return exp, dataset, ws, view


def make_plan(exp, dataset, view):
    from protocol.calibration import Calibration
    from protocol.plan import make_plan

    try:
        return make_plan(exp, dataset, view.config, Calibration.load(view.runs, view.memory, view.jobs.store))
    except (KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def cmd_plan(args: argparse.Namespace) -> int:
    from jobs.types import format_seconds
    from protocol.plan import time_lines

    exp, dataset, ws, view = _load(args.file)
    plan = make_plan(exp, dataset, view)
    if args.json:
        print(json.dumps({"units": len(plan.job.units), "rows": [r.model_dump() for r in plan.rows],
                          "wall_seconds": plan.wall_seconds, "bound": plan.bound,
                          "endpoint_seconds": plan.endpoint_seconds, "endpoint": plan.endpoint,
                          "app_seconds": plan.app_seconds, "schedule_seconds": plan.schedule_seconds,
                          "app_cpu_per_call": plan.app_cpu_per_call, "app_cpu_measured": plan.app_cpu_measured,
                          "notes": plan.notes}, indent=1))
        return 0
    done = {u.key for u in ws.jobs.store.units(plan.job.job_id, "done")} if ws.jobs.store.exists(plan.job.job_id) else set()
    print(f"experiment {exp.name}: {len(plan.job.units)} units ({len(done)} already done) on {dataset.root}")
    print(f"{'task':<34} {'method':<13} {'units':>6} {'calls':>9} {'tokens in':>11} {'tokens out':>11} "
          f"{'cost':>10} {'LLM time':>9}  basis")
    for r in sorted(plan.rows, key=lambda r: (r.task, r.method)):
        cost = f"${r.usd:.4f}" if r.usd is not None else "unpriced"
        print(f"{r.task:<34} {r.method:<13} {r.units:>6} {r.calls:>9.0f} {r.tokens_in:>11,.0f} {r.tokens_out:>11,.0f} "
              f"{cost:>10} {format_seconds(r.seconds):>9}  {r.basis}")
    unpriced = sorted({m for r in plan.rows for m in r.unpriced})
    total = sum(r.usd or 0 for r in plan.rows)
    print(f"total: {plan.total('calls'):,.0f} calls, {plan.total('tokens_in'):,.0f} tokens in, "
          f"{plan.total('tokens_out'):,.0f} out, ${total:.4f}" + (f" + unpriced {', '.join(unpriced)}" if unpriced else "")
          )
    for line in time_lines(plan):
        print(f"time: {line}")
    for note in plan.notes:
        print(f"note: {note}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from cli.jobs_out import failed_lines, run_job
    from studio.units import UnitEnv

    exp, dataset, ws, view = _load(args.file)
    plan = make_plan(exp, dataset, view)
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    concurrency = args.concurrency or exp.concurrency
    executor = None
    if args.executor == "ray":
        from studio.remote import ray_executor

        executor = ray_executor(ws, args.address, cpus_per_unit=args.cpus_per_unit)
    env = UnitEnv(view, view.llm(session_id=plan.job.job_id))
    print(f"experiment {exp.name}: {len(plan.job.units)} units, concurrency {concurrency}, {args.executor}",
          file=sys.stderr, flush=True)
    try:
        summary = run_job(ws, plan.job, env, concurrency, executor=executor, bar=True, estimates=plan.kind_seconds)
    except KeyboardInterrupt:
        print("interrupted: finished units are kept; run the same command again to continue", file=sys.stderr)
        return 130
    for line in failed_lines(summary):
        print(line, file=sys.stderr)
    print(json.dumps({"job_id": summary.job_id, "status": summary.status, **summary.counts,
                      "blocked": summary.blocked}))
    return 0 if summary.status == "done" else 1


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from protocol.report import build_report, render

    exp, _dataset, ws, _view = _load(args.file)
    if not ws.jobs.store.exists(exp.job_id()):
        print(f"error: experiment {exp.name} has not run yet (pal experiment run {args.file})", file=sys.stderr)
        return 2
    text = render(build_report(exp, ws.jobs.store.units(exp.job_id()), ws.evals, ws.simfidelity), args.format)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
