"""``pal llm check [--role ROLE] [--quick]``: is each role's endpoint up, how fast, does structured output parse,
and what it can do — context window, structured modes, streaming, seed, reasoning (see backends.llm.check).

``pal llm models [--prepare MODEL|all]``: the local models of the catalog (backends.local_models), whether each is
installed and ready (joined, sha256 verified); ``--prepare`` joins and verifies now (``make setup`` does it for the
default model), exit 1 with the reason when a model cannot be served."""

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
    m = lsub.add_parser("models", help="the local models: installed? joined and verified?")
    m.add_argument("--prepare", metavar="MODEL", help="join and verify this model now (a name, key or 'all')")
    m.set_defaults(func=cmd_models)


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


def cmd_models(args: argparse.Namespace) -> int:
    from backends.local_models import CATALOG, DEFAULT_LOCAL_MODEL, find_model
    from backends.model_files import (
        ModelUnavailable,
        model_cache_dir,
        part_files,
        prepare_model,
        recorded_check,
        served_path,
    )

    if args.prepare:
        found = find_model(args.prepare)
        if found is None and args.prepare != "all":
            print(f"no local model is called {args.prepare!r} (models: {', '.join(CATALOG)})", file=sys.stderr)
            return 2
        failed = False
        for model in [found] if found else list(CATALOG.values()):
            try:
                ready = prepare_model(model)
            except ModelUnavailable as e:
                print(f"{model.name}: {e}", file=sys.stderr)
                failed = True
                continue
            how = (f"joined in {ready.joined_s:.1f} s" if ready.joined else f"verified in {ready.verified_s:.1f} s"
                   if ready.hashed else "already verified")
            print(f"{model.name}: ready, sha256 {ready.sha256} ({how}) at {ready.path}")
        return 1 if failed else 0
    print(f"model cache: {model_cache_dir()}")
    for model in CATALOG.values():
        try:
            part_files(model)
            path = served_path(model)
            check = recorded_check(path) if path.exists() else None
            state = ("ready (sha256 verified)" if check is not None and check.sha256 == model.sha256
                     else "installed, joined and verified on first use")
        except ModelUnavailable as e:
            state = f"not installed: {model.install}" if "not installed" in str(e) else f"unusable: {e}"
        default = " (default)" if model.name == DEFAULT_LOCAL_MODEL else ""
        print(f"{model.name}{default}: {model.describe()} · {model.licence} · {state}")
    return 0
