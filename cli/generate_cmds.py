"""``pal generate``: grow synthetic users with the PAL-Set pipeline (re-running the same command resumes)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="generate synthetic users into a dataset folder (PAL-Set pipeline, §2); "
                                        "re-running the same command continues unfinished users")
    p.add_argument("--out", required=True, help="dataset folder (new, or an existing release to add users to)")
    p.add_argument("--users", type=int, default=1, help="how many users (default 1)")
    p.add_argument("--months", type=int, default=7, help="timeline months ending 2024-12 (spec 7–12; 1 for small runs)")
    p.add_argument("--lang", choices=["en", "zh"], default="en")
    p.add_argument("--concurrency", type=int, default=1, help="users generated in parallel (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the first user (user i gets seed+i)")
    p.add_argument("--describe", help="free-text description of the user(s) to create")
    p.add_argument("--seed-users", help="JSON list of seed profiles (seed_users.json format) used as format examples")
    p.add_argument("--resume", action="store_true", help="continue every unfinished run aimed at --out")
    p.add_argument("--rerun-from", metavar="STEP", help="with --resume: first drop STEP and every step after it in "
                                                        "those runs, so they are asked afresh (as the Generate page's "
                                                        "re-run); give it once, then resume plainly")
    p.set_defaults(func=cmd_generate)


def _config(args: argparse.Namespace):
    from synth.config import SynthConfig

    return SynthConfig(lang=args.lang, months=args.months, seed=args.seed, description=args.describe)


def cmd_generate(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from backends.config import ConfigError
    from cli.context import open_workspace
    from synth.batch import plan, unfinished
    from synth.pipeline import Pipeline
    from synth.registry import NAMES

    if args.users < 1 or args.concurrency < 1:
        print("error: --users and --concurrency must be at least 1", file=sys.stderr)
        return 2
    try:
        base = _config(args)
        seeds = json.loads(Path(args.seed_users).read_text(encoding="utf-8")) if args.seed_users else None
        llm = _client()
    except ValidationError as e:
        print(f"error: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}", file=sys.stderr)
        return 2
    except (ConfigError, OSError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.rerun_from and (not args.resume or args.rerun_from not in NAMES):
        print(f"error: --rerun-from needs --resume and one of the steps: {', '.join(NAMES)}", file=sys.stderr)
        return 2
    store = open_workspace().synth
    planned = unfinished(store, args.out) if args.resume else plan(args.out, args.users, base, seeds)
    if not planned:
        print("nothing to resume: every run aimed at this folder has finished", file=sys.stderr)
        return 0
    for p in planned if args.rerun_from else []:
        dropped = Pipeline(p.run_id, store).invalidate(args.rerun_from)
        print(f"{p.run_id}: asking afresh from {args.rerun_from} (dropped: {', '.join(dropped) or 'nothing yet'})",
              file=sys.stderr)
    print(f"generating {len(planned)} user(s) into {args.out} with concurrency {args.concurrency}", file=sys.stderr,
          flush=True)
    try:
        outcomes = _run(planned, llm, args.concurrency)
    except KeyboardInterrupt:
        print("interrupted: finished steps are kept; run the same command again to resume", file=sys.stderr)
        return 130
    for o in outcomes:
        print(f"{o.run_id}: {o.status}" + (f" as user {o.uid}" if o.uid else "") + (f" ({o.error})" if o.error else ""),
              file=sys.stderr)
        for line in o.report:
            print(f"  {line}", file=sys.stderr)
    totals = llm.store.totals()
    print(json.dumps({"out": args.out, "users": [o.model_dump() for o in outcomes],
                      "llm_calls": totals.calls, "tokens_in": totals.tokens_in, "tokens_out": totals.tokens_out},
                     ensure_ascii=False))
    return 0 if all(o.status == "finished" for o in outcomes) else 1


def _run(planned: list, llm, concurrency: int) -> list:
    """One ``synth.generate`` unit per planned user, run here on ``concurrency`` threads."""
    import hashlib

    from cli.context import open_workspace
    from cli.jobs_out import run_job, unit_env
    from jobs.types import JobSpec, UnitSpec
    from synth.batch import Outcome
    from synth.pipeline import Pipeline

    ws = open_workspace()
    for p in planned:
        if not ws.synth.exists(p.run_id):
            ws.synth.create(p.run_id, p.config, p.out)
    digest = hashlib.sha1("|".join(p.run_id for p in planned).encode()).hexdigest()[:12]
    job = JobSpec(job_id=f"generate-{digest}", kind="generate", title=f"generate {len(planned)} user(s)",
                  created_by="cli", pool="cli",
                  units=[UnitSpec(key=p.run_id, kind="synth.generate", payload={"run_id": p.run_id}) for p in planned])
    env = unit_env(ws, llm, extra={"synth_hooks": {"on_step": _step_printer, "on_call": _call_printer}})
    run_job(ws, job, env, concurrency)
    outcomes = []
    for p in planned:
        pipe = Pipeline(p.run_id, ws.synth)
        info = pipe.info
        outcomes.append(Outcome(run_id=p.run_id, status=info.status, uid=info.uid, error=info.error,
                                report=pipe.report().lines()))
    return outcomes


def _client():
    from cli.context import open_workspace

    return open_workspace().llm(session_id="cli-generate")


def _step_printer(run_id: str):
    from synth.registry import NAMES

    def show(step: str, event: str, record) -> None:
        n = NAMES.index(step) + 1
        detail = f" ({record.calls} call(s), {record.retries} retries, {record.seconds:.1f}s)" if record else ""
        print(f"[{run_id}] {n}/{len(NAMES)} {step}: {event}{detail}", file=sys.stderr, flush=True)

    return show


def _call_printer(run_id: str):
    def show(step: str, unit: str) -> None:
        if unit:
            print(f"[{run_id}]   {step} {unit}", file=sys.stderr, flush=True)

    return show
