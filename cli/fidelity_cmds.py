"""``pal memory fidelity``: how close a method's memory is to the gold memory, per user, with a summary over users.

Methods without an LLM are built (or resumed) first; an LLM method must be built already (``pal memory
build``) unless ``--build`` is given. Every report is stored in the run store.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from memory.methods import METHODS

log = logging.getLogger(__name__)


def register(msub: argparse._SubParsersAction) -> None:
    c = msub.add_parser("fidelity", help="fidelity of a method's memory against the gold memory (oracle upper bound)")
    c.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout")
    who = c.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", help="one user id")
    who.add_argument("--users", help="comma-separated user ids, or 'all'")
    c.add_argument("--method", required=True, choices=list(METHODS))
    c.add_argument("--embedder", help="embedder name (default: configured, 'auto' by language)")
    c.add_argument("--threshold", type=float, help="cosine for a match (default: the embedder's, see the definitions)")
    c.add_argument("--build", action="store_true", help="also build an LLM method's missing sessions (slow)")
    c.add_argument("--judge", action="store_true", help="add the judge-based variant (judge role; one call a statement)")
    c.add_argument("--judge-limit", type=int, default=None, help="judge at most this many gold statements per user")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_fidelity)


def _users(args: argparse.Namespace, dataset) -> list[str]:
    if args.user:
        return [args.user]
    if args.users.strip() == "all":
        return list(dataset.users)
    return [u.strip() for u in args.users.split(",") if u.strip()]


def _measure(dataset, uid: str, args: argparse.Namespace, store, config):
    from cli.context import open_workspace
    from evaluation.fidelity.board import report_summary
    from evaluation.fidelity.service import judge_report, measure_build
    from memory.methods import get_method_class

    builder = open_workspace().open_builder(dataset, uid, args.method, embedder=args.embedder)
    if builder.latest_stage() < builder.total_stages - 1:
        if get_method_class(args.method).uses_llm and not args.build:
            raise RuntimeError(f"{args.method} for user {uid} is not fully built: run `pal memory build --dataset "
                               f"{args.dataset} --user {uid} --method {args.method}` or pass --build")
        print(f"building {args.method} for user {uid}…", file=sys.stderr)
        builder.run()
    report = measure_build(builder, store, config=config)
    if args.judge:
        report = judge_report(report, builder, builder.llm or _llm(), store, limit=args.judge_limit)
    out = report_summary(report)
    out["threshold"], out["embedder"] = report.threshold, report.embedder
    if report.judge is not None:
        out["judge"] = report.judge.model_dump(exclude={"verdicts"})
    out["missed"] = [m.model_dump() for m in report.misses if m.layer != "text"]
    return report, out


def _llm():
    from cli.context import open_workspace

    return open_workspace().llm(session_id="cli-fidelity")


def cmd_fidelity(args: argparse.Namespace) -> int:
    from backends.config import ConfigError
    from backends.llm.errors import LLMError
    from cli.context import open_workspace
    from evaluation.fidelity import DEFINITIONS
    from evaluation.fidelity.availability import availability
    from evaluation.fidelity.board import leaderboard
    from evaluation.fidelity.types import FidelityConfig
    from memory.methods import display_name
    from palset.loader import load_dataset

    dataset = load_dataset(args.dataset, lazy=True)
    if not dataset.users:
        print(f"error: {args.dataset}: no users ({'; '.join(str(p) for p in dataset.problems[:3])})", file=sys.stderr)
        return 2
    uids = _users(args, dataset)
    unknown = [u for u in uids if u not in dataset.users]
    if unknown:
        print(f"error: no user {', '.join(unknown)} in {args.dataset}", file=sys.stderr)
        return 2
    try:
        config = FidelityConfig(threshold=args.threshold)
    except ValueError as e:
        print(f"error: --threshold: {e}", file=sys.stderr)
        return 2
    store, reports, rows, failed = open_workspace().fidelity, [], [], 0
    for uid in uids:
        try:
            report, row = _measure(dataset, uid, args, store, config)
            reports.append(report)
            rows.append(row)
        except (RuntimeError, KeyError, ValueError, ConfigError, LLMError) as e:
            log.warning("fidelity of %s for user %s failed", args.method, uid, exc_info=True)
            print(f"error: user {uid}: {e}", file=sys.stderr)
            failed += 1
    board = leaderboard(reports)
    files = [a.model_dump() for a in availability(dataset) if not a.available]
    result = {"method": args.method, "label": display_name(args.method), "dataset": str(dataset.root),
              "users": rows, "summary": board[0] if board else None, "definitions": DEFINITIONS,
              "unavailable_files": files}
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2, default=str))
    else:
        _print_table(result)
    return 1 if failed else 0


def _fmt(value) -> str:
    return "   –  " if value is None else f"{value:6.3f}" if isinstance(value, float) else f"{value:>6}"


def _print_table(result: dict) -> None:
    from evaluation.fidelity.types import HEADLINE

    print(f"{result['label']} on {result['dataset']}")
    print("user   " + " ".join(f"{n[:14]:>14}" for n in HEADLINE))
    for r in result["users"]:
        print(f"{r['user']:<6} " + " ".join(f"{_fmt(r[n]):>14}" for n in HEADLINE))
    if result["summary"]:
        s = result["summary"]
        print("mean   " + " ".join(f"{_fmt(s[n]['value']):>14}" for n in HEADLINE))
        print(f"threshold {s['threshold']} ({s['embedder']}); 95% bootstrap CIs over users in --json")
    for f in result["unavailable_files"]:
        print(f"not measurable here: {f['figure']} needs {', '.join(f['missing'])}")
