"""``pal simulate`` (batch simulation, resumable), ``pal simulate fidelity`` (:mod:`cli.simfid_cmds`), ``pal runs
list``, ``pal runs export`` and ``pal runs discard``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cli import simfid_cmds
from memory.methods import METHODS, display_name


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="simulate every query topic of the selected users with each method "
                                        "(re-running the same command resumes); `simulate fidelity` checks them")
    p.add_argument("--dataset", help="dataset folder in PAL-Set layout (required)")
    p.add_argument("--methods", help=f"comma-separated memory methods ({', '.join(METHODS)}) (required)")
    p.add_argument("--simulator", default="llm",
                   help="who plays the user: llm (default), llm+style (with the user's earlier turns' profile and "
                        "style), replay (the dataset's own dialogue), always-accept or random-verdict")
    p.add_argument("--users", help="comma-separated user ids (default: every user)")
    p.add_argument("--topics", choices=["query", "all"], default="query",
                   help="topics of the query sessions (default) or of every session")
    p.add_argument("--task-ids", help="comma-separated dialogue-task ids ({sample_id}_{topic_key}, e.g. "
                                      "1002_sample7_topic-1): only these topics, of any session")
    p.add_argument("--seed", default="0",
                   help="the runs' seed (default 0): the run id, every sampling seed and the cache keys derive from it, "
                        "so another seed records another take of the same topics beside the stored ones")
    p.add_argument("--concurrency", type=int, default=4, help="runs in parallel (default 4)")
    p.set_defaults(func=cmd_simulate)
    simfid_cmds.register(p)

    p = sub.add_parser("runs", help="list, export and discard simulation runs")
    rsub = p.add_subparsers(dest="runs_command", required=True)
    ls = rsub.add_parser("list", help="stored simulation runs, newest first")
    _add_filters(ls)
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=cmd_list)
    ex = rsub.add_parser("export", help="export runs as JSON lines or Markdown transcripts")
    ex.add_argument("run_id", nargs="?", help="the run to export (or --all)")
    ex.add_argument("--all", action="store_true", help="every stored run (narrowed by the filters)")
    _add_filters(ex)
    ex.add_argument("--format", choices=["jsonl", "md"], default="jsonl")
    ex.add_argument("--out", help="write to this file instead of stdout")
    ex.set_defaults(func=cmd_export)
    dc = rsub.add_parser("discard", help="delete runs with their judgments and simulator fidelity, so the command "
                                         "that made them records them anew (shows what would go without --yes)")
    dc.add_argument("run_ids", nargs="+", help="the runs to discard")
    dc.add_argument("--yes", action="store_true", help="discard them (without it, only say what would go)")
    dc.set_defaults(func=cmd_discard)
    ck = rsub.add_parser("check", help="read stored runs again under the simulator's current rules: the turns it "
                                       "would ask again today, and why (to choose runs to record anew)")
    ck.add_argument("--dataset", required=True, help="the runs' dataset folder in PAL-Set layout, or a known name")
    _add_filters(ck)
    ck.add_argument("--ids", action="store_true", help="print only the ids of the runs with such turns, "
                                                       "comma-separated (for make demo-workspace REDO=…)")
    ck.add_argument("--json", action="store_true", help="print JSON")
    ck.set_defaults(func=cmd_check)


def _add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", help="only this user's runs")
    p.add_argument("--method", help="only runs of this memory method")
    p.add_argument("--status", choices=["running", "finished", "stopped", "failed"])


def _filters(args: argparse.Namespace) -> dict[str, str]:
    pairs = {"user_id": args.user, "method": args.method, "status": args.status}
    return {k: v for k, v in pairs.items() if v}


# ---------------------------------------------------------------------------------------------- simulate


def cmd_simulate(args: argparse.Namespace) -> int:
    from palset.loader import load_dataset
    from sim.batch import plan_runs
    from sim.types import parse_variant

    missing = [f"--{n}" for n in ("dataset", "methods") if not getattr(args, n)]
    if missing:
        print(f"error: pal simulate needs {' and '.join(missing)} (or: pal simulate fidelity --dataset D)",
              file=sys.stderr)
        return 2
    if args.concurrency < 1:
        print("error: --concurrency must be at least 1", file=sys.stderr)
        return 2
    try:
        simulator, user_style = parse_variant(args.simulator)
    except ValueError as e:
        print(f"error: --simulator: {e}", file=sys.stderr)
        return 2
    dataset = load_dataset(args.dataset, lazy=True)
    if not dataset.users:
        print(f"error: {args.dataset}: no users ({'; '.join(str(p) for p in dataset.problems[:3])})", file=sys.stderr)
        return 2
    users = [u.strip() for u in args.users.split(",") if u.strip()] if args.users else None
    try:
        task_ids = [t.strip() for t in args.task_ids.split(",") if t.strip()] if args.task_ids else None
        specs = plan_runs(dataset, [m.strip() for m in args.methods.split(",") if m.strip()], users, args.topics,
                          seed=args.seed.strip() or "0", task_ids=task_ids, simulator=simulator,
                          user_style=user_style)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"simulating {len(specs)} run(s) with concurrency {args.concurrency}", file=sys.stderr, flush=True)
    return _run(dataset, specs, args.concurrency)


def sim_job(dataset, specs: list, created_by: str = "cli", pool: str = "cli"):
    """Build units for the memories the runs read, then one ``sim.run`` unit per spec (longest schedules
    first); the job id follows from the specs, so the same command continues the same job."""
    import hashlib

    from jobs.types import JobSpec
    from protocol.units import sim_units
    from sim.store import run_id_for

    ids = sorted(run_id_for(s) for s in specs)
    digest = hashlib.sha1("|".join([str(dataset.root), *ids]).encode()).hexdigest()[:12]
    return JobSpec(job_id=f"simulate-{digest}", kind="simulate", title=f"simulate {len(specs)} run(s)",
                   created_by=created_by, pool=pool, units=sim_units(dataset, specs))


def _run(dataset, specs, concurrency: int) -> int:
    from backends.config import ConfigError
    from cli.context import open_workspace
    from cli.jobs_out import Counter, run_job, unit_env
    from sim.batch import _longest_first

    try:
        ws = open_workspace()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    spec = sim_job(dataset, _longest_first(dataset, specs))
    before = {u.unit_id for u in ws.jobs.store.units(spec.job_id, status="done") if u.kind == "sim.run"} \
        if ws.jobs.store.exists(spec.job_id) else set()
    session = f"batch-{spec.job_id}"
    env = unit_env(ws, ws.llm(session_id=session), Counter(len(specs), len(before)))
    calls_before = ws.runs.totals(session_id=session)
    started = time.perf_counter()
    try:
        run_job(ws, spec, env, concurrency)
    except KeyboardInterrupt:
        print("interrupted: every saved utterance is kept; run the same command again to resume", file=sys.stderr)
        return 130
    summary = _summary(ws, spec.job_id, before, len(specs), session, calls_before)
    summary["wall_seconds"] = round(time.perf_counter() - started, 3)
    print(json.dumps(summary, ensure_ascii=False))
    return 1 if summary["failed"] else 0


def _summary(ws, job_id: str, before: set[str], runs: int, session: str, calls_before) -> dict:
    """The batch summary ``pal simulate`` has always printed, from the job's units."""
    out = {"runs": runs, "finished": 0, "failed": 0, "skipped": 0, "cancelled": 0, "utterances_written": 0,
           "session_id": session, "errors": {}}
    for unit in ws.jobs.store.units(job_id):
        if unit.kind != "sim.run":
            continue
        if unit.unit_id in before:
            out["skipped"] += 1
            continue
        outcome = next(iter(((unit.result or {}).get("runs") or {unit.label: {}}).values()))
        status = {"done": outcome.get("status", "finished"), "failed": "failed"}.get(unit.status, "cancelled")
        status = "skipped" if status == "skipped" else status
        out[status if status in out else "finished"] += 1
        out["utterances_written"] += outcome.get("written", 0)
        if unit.status == "failed":
            out["errors"][unit.label] = unit.last_error or "failed"
    totals = ws.runs.totals(session_id=session)
    out.update(llm_calls=totals.calls - calls_before.calls, cache_hits=totals.cache_hits - calls_before.cache_hits,
               tokens_in=totals.tokens_in - calls_before.tokens_in, tokens_out=totals.tokens_out - calls_before.tokens_out)
    return out


# ---------------------------------------------------------------------------------------------- runs


def cmd_list(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    rows = open_workspace().sims.list(**_filters(args))
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return 0
    for r in rows:
        print(f"{r['run_id']:<44} {r['status']:<9} {r['utterances']:>3} utt  user {r['user_id']} "
              f"{r['sample_id']} {r['topic_key']} {display_name(r['method'])}"
              + (f" seed {r['seed']}" if r["seed"] != "0" else ""))
    print(f"{len(rows)} run(s)", file=sys.stderr)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    store = open_workspace().sims
    if bool(args.run_id) == bool(args.all):
        print("error: give a run id or --all (not both)", file=sys.stderr)
        return 2
    ids = [args.run_id] if args.run_id else [r["run_id"] for r in reversed(store.list(**_filters(args)))]
    try:
        records = [store.load(i) for i in ids]
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    text = _render(records, args.format)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {len(records)} run(s) to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_discard(args: argparse.Namespace) -> int:
    """What would go (each run's utterances and the judgments that read it), then, with ``--yes``, discard it."""
    from cli.context import open_workspace
    from studio.discard import DiscardRefused, discard_problems, discard_runs

    ws = open_workspace()
    if problems := discard_problems(ws, args.run_ids):
        print("error: nothing discarded: " + "; ".join(problems), file=sys.stderr)
        return 2
    if not args.yes:
        for run_id in dict.fromkeys(args.run_ids):
            judged = ws.evals.keys_reading(run_id)  # keys only: a lab's store holds thousands of judgments
            print(f"would discard {run_id} ({ws.sims.count_utterances(run_id)} utterances) and {len(judged)} "
                  f"judgment(s) that read it")
        print("nothing discarded: add --yes to discard", file=sys.stderr)
        return 1
    try:
        done = discard_runs(ws, args.run_ids, actor="cli")
    except DiscardRefused as e:  # a driver took one of them between the check and the deletion
        print(f"error: {e}", file=sys.stderr)
        return 2
    for d in done:
        print(f"discarded {d.run_id} ({d.utterances} utterances, {len(d.judgments)} judgment(s), {d.fidelity} "
              f"simulator-fidelity result(s); their {d.calls} LLM call(s) stay counted, filed as discarded; "
              f"{len(d.requeued)} job unit(s) queued again); the command that made it records it anew")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Each stored run of the dataset (narrowed by the filters) through :func:`sim.recheck.check_run`; a line per
    turn the current rules would ask again, and the counts per reason."""
    from cli.context import load_dataset_arg, open_workspace
    from palset.dataset import dataset_key
    from sim.recheck import check_run, reason_counts
    from sim.rulebook import rulebook_version

    dataset = load_dataset_arg(args.dataset)
    store = open_workspace().sims
    rows = list(reversed(store.list(dataset=dataset_key(dataset.root), **_filters(args))))
    unknown = sorted({r["user_id"] for r in rows} - set(dataset.users))
    if unknown:
        print(f"error: runs of users not in {dataset.root}: {', '.join(unknown)}", file=sys.stderr)
        return 2
    checks = [check_run(store.load(r["run_id"]), dataset.users[r["user_id"]]) for r in rows]
    failing = [c for c in checks if c.slips]
    if args.json:
        print(json.dumps([c.model_dump() for c in checks], ensure_ascii=False, indent=1))
    elif args.ids:
        print(",".join(c.run_id for c in failing))
    else:
        for c in failing:
            print(f"{c.run_id} ({c.task_id}, {display_name(c.method)})")
            for s in c.slips:
                rules = f" [{', '.join(s.rules)}]" if s.rules else ""
                print(f"  turn {s.turn_no} {s.side}{rules}: {'; '.join(s.reasons)}: {s.text[:70]!r}")
    counts = ", ".join(f"{reason} {n}" for reason, n in reason_counts(checks).most_common())
    print(f"{len(failing)} of {len(checks)} run(s) hold turns the current rules (rulebook {rulebook_version()}) "
          "would ask again"
          + (f" — turns by reason: {counts}" if counts else ""), file=sys.stderr)
    return 0


def _render(records: list, fmt: str) -> str:
    """jsonl: one complete run record per line; md: the transcripts separated by '---' lines."""
    from sim.export import run_to_json, run_to_markdown

    if fmt == "jsonl":
        return "".join(json.dumps(json.loads(run_to_json(r)), ensure_ascii=False) + "\n" for r in records)
    return "\n---\n\n".join(run_to_markdown(r) for r in records)
