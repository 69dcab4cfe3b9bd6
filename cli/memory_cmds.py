"""``pal memory build`` and ``pal memory trace``."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from cli import fidelity_cmds
from memory.methods import METHODS

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="build and query assistant memories")
    msub = p.add_subparsers(dest="memory_command", required=True)
    for name, helptext in (("build", "build (or resume) a user's memory, session by session"),
                           ("trace", "retrieve for a query and print the retrieval trace")):
        c = msub.add_parser(name, help=helptext)
        c.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout")
        c.add_argument("--user", required=True)
        c.add_argument("--method", required=True, choices=list(METHODS))
        c.add_argument("--embedder", help="embedder name (default: configured, 'auto' by language)")
        if name == "build":
            c.add_argument("--until", help="stop after this session id (default: all sessions)")
            c.set_defaults(func=cmd_build)
        else:
            c.add_argument("--query", required=True)
            c.add_argument("--purpose", choices=["requirement", "solution"], default="requirement")
            c.add_argument("--session", help="as of this session's logs (default: the latest memory)")
            c.add_argument("--json", action="store_true")
            c.set_defaults(func=cmd_trace)
    fidelity_cmds.register(msub)


def _open(args: argparse.Namespace):
    from cli.context import open_workspace
    from palset.loader import load_dataset

    dataset = load_dataset(args.dataset, lazy=True)
    if not dataset.users:
        raise SystemExit(f"{args.dataset}: no users ({'; '.join(str(p) for p in dataset.problems[:3])})")
    if args.user in dataset.users:  # a mistyped session is refused before any embedder or model is loaded
        for sample_id in (getattr(args, "until", None), getattr(args, "session", None)):
            if sample_id and dataset.users[args.user].session(sample_id) is None:
                raise ValueError(f"no session {sample_id!r} for user {args.user}")
    return dataset, open_workspace().open_builder(dataset, args.user, args.method, embedder=args.embedder)


def build_job(dataset, builder, until: int, embedder: str | None = None):
    """One unit per session up to ``until``, each after the previous (a build goes in time order)."""
    from jobs.types import JobSpec
    from protocol.units import build_units

    return JobSpec(job_id=f"memory-{builder.build_id}", kind="memory", created_by="cli",
                   title=f"memory {builder.method} for user {builder.user.uid}", pool="cli",
                   units=build_units(dataset, builder.user.uid, builder.method, until, embedder=embedder))


def cmd_build(args: argparse.Namespace) -> int:
    from cli.context import open_workspace
    from cli.jobs_out import failed_lines, run_job, unit_env

    try:
        dataset, builder = _open(args)
    except (KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    user = builder.user
    until = len(user.sessions) - 1
    if args.until:
        until = [s.sample_id for s in user.sessions].index(args.until)  # checked by _open
    done_before = len(builder.store.done_stages(builder.build_id))
    print(f"building {args.method} for user {user.uid} ({len(user.sessions)} sessions, "
          f"{done_before}/{builder.total_stages} stages already done)", file=sys.stderr)
    ws = open_workspace()
    spec = build_job(dataset, builder, until, args.embedder)
    try:
        summary = run_job(ws, spec, unit_env(ws, builder.llm or ws.llm()), bar=builder.llm is not None, details=True,
                          every=5.0)  # a method that calls an LLM: its calls in flight and cached tokens as it goes
    except KeyboardInterrupt:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130
    if summary.status != "done":
        log.warning("memory build %s stopped: %s", builder.build_id, summary.errors)
        for line in failed_lines(summary):
            print(line, file=sys.stderr)
        print("finished stages are saved: run the same command again to resume", file=sys.stderr)
        return 1
    info = builder.store.info(builder.build_id)
    calls = ws.runs.totals(run_id=builder.build_id)
    print(json.dumps({"build_id": info.build_id, "stages_done": info.stages_done, "sessions_done": len(info.sessions_done),
                      "llm_calls": info.llm_calls, "tokens_in": info.tokens_in, "tokens_out": info.tokens_out,
                      "tokens_cached": calls.tokens_cached if calls.tokens_reported else None,
                      "seconds": round(info.seconds, 1)}))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from backends.llm.errors import LLMError

    try:
        dataset, builder = _open(args)
    except (KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    session = builder.user.session(args.session) if args.session else None  # checked by _open
    try:
        trace = builder.retrieve(args.query, args.purpose, session)
    except LLMError as e:
        log.warning("memory build stopped during a trace: %s", e)
        print(f"LLM error while building: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(trace.summary(), ensure_ascii=False, indent=2))
    else:
        for r in trace.items:
            score = f"{r.score:.3f}" if r.score is not None else "  -  "
            print(f"{score} [{r.item.layer}] {r.item.id}: {r.item.text[:100]}")
        print(f"\n{trace.context}\n\ncontext tokens: {trace.tokens} (full history: {trace.full_history_tokens})")
    return 0
