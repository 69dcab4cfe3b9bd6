"""``pal validate``, ``pal stats`` and ``pal dataset assemble``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from palset.files import MISSING_MEANS
from palset.loader import load_dataset
from palset.stats import dataset_stats


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="validate a dataset folder in the PAL-Set release layout")
    p.add_argument("path")
    p.add_argument("--quiet", action="store_true", help="print errors only (no warnings or notes)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("stats", help="counts of users, sessions, logs, turns and topics")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("dataset", help="dataset utilities")
    dsub = p.add_subparsers(dest="dataset_command", required=True)
    a = dsub.add_parser("assemble", help="assemble user bundles (JSON) into a release folder")
    a.add_argument("bundles", nargs="+", help="user bundle JSON files")
    a.add_argument("--out", required=True)
    a.set_defaults(func=cmd_assemble)


def cmd_validate(args: argparse.Namespace) -> int:
    dataset = load_dataset(args.path)
    errors = dataset.errors
    for problem in dataset.problems:
        if problem.level == "error" or not args.quiet:
            print(problem)
    if not args.quiet and dataset.users:
        for name in dataset.missing:
            print(f"note: {name} file absent: {MISSING_MEANS[name]}", file=sys.stderr)
    n_sessions = sum(len(u.sessions) for u in dataset.users.values())
    status = "invalid" if errors else "valid"
    print(f"{args.path}: {status}: {len(dataset.users)} users, {n_sessions} sessions, {len(errors)} error(s)", file=sys.stderr)
    return 1 if errors or not dataset.users else 0


def cmd_stats(args: argparse.Namespace) -> int:
    dataset = load_dataset(args.path)
    if not dataset.users:
        for problem in dataset.problems:
            print(problem, file=sys.stderr)
        return 1
    stats = dataset_stats(dataset)
    if args.json:
        print(json.dumps(stats, ensure_ascii=False, indent=2))
    else:
        for key, value in stats.items():
            if key not in ("per_user", "log_types"):
                print(f"{key:>20}: {value}")
        for key, value in stats["log_types"].items():  # type: ignore[union-attr]  # stats['log_types'] is a dict of counts
            print(f"{'logs/' + key:>20}: {value}")
    return 0


def cmd_assemble(args: argparse.Namespace) -> int:
    from palset.assemble import UserBundle, write_release

    bundles = [UserBundle.model_validate_json(Path(p).read_text(encoding="utf-8")) for p in args.bundles]
    for path in write_release(args.out, bundles):
        print(path)
    return 0
