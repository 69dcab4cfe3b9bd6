"""``pal llm check [--role ROLE] [--quick]``: is each role's endpoint up, how fast, does structured output parse,
and what it can do — context window, structured modes, streaming, seed, reasoning (see backends.llm.check)."""

from __future__ import annotations

import argparse
import sys

from backends.config import ROLES, ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("llm", help="LLM endpoints")
    lsub = p.add_subparsers(dest="llm_command", required=True)
    c = lsub.add_parser("check", help="send a chat and a structured request per role; exit 1 on failure")
    c.add_argument("--role", choices=ROLES, help="check one role (default: every role, each endpoint once)")
    c.add_argument("--quick", action="store_true",
                   help="only the chat and the structured request (no probes of modes, streaming, seed)")
    c.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from backends.llm.check import check_role
    from cli.context import open_workspace

    try:
        client = open_workspace().llm(session_id="cli-check")
    except ConfigError as e:
        print(f"configuration error: {e}", file=sys.stderr)
        return 2
    roles = [args.role] if args.role else list(ROLES)
    seen: dict[tuple, str] = {}
    failed = False
    for role in roles:
        rc = client.config.role(role)
        key = (rc.provider, rc.base_url, rc.model)
        if key in seen:
            print(f"{role}: same endpoint and model as {seen[key]}")
            continue
        seen[key] = role
        report = check_role(client, role, capabilities=not args.quick)
        print("\n".join(report.lines()))
        failed |= not report.ok
    return 1 if failed else 0
