"""``pal users add NAME --role admin|researcher|annotator [--email E]``, ``pal users remove NAME``, ``pal users list``,
``pal users password NAME``, ``pal users role NAME ROLE``, ``pal users sessions [NAME]``, ``pal users sign-out NAME``,
``pal users unbind NAME``, ``pal users rotate-key``.

A password is asked for (twice, not echoed) or read from standard input (``--password-stdin``, one line), never taken
from the command line, where every user of the machine sees it in the process list. A changed password or role ends
the account's sign-ins; ``sign-out`` ends them without a change (a lost laptop); ``rotate-key`` makes a new session
signing key and ends everyone's.
Every change is recorded in the audit log (actor ``cli:<OS user>``)."""

from __future__ import annotations

import argparse
import getpass
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("users", help="accounts (admins, researchers, annotators) for PAL_AUTH=accounts")
    usub = p.add_subparsers(dest="users_command", required=True)
    add = usub.add_parser("add", help="add an account (the password is stored only as a salted bcrypt hash)")
    add.add_argument("name")
    add.add_argument("--role", choices=["admin", "researcher", "annotator"], required=True)
    _password_options(add)
    add.add_argument("--email", help="the e-mail a single sign-on identity must carry to map to this account")
    add.add_argument("--sso-only", action="store_true", help="no password: signs in only by single sign-on")
    add.set_defaults(func=cmd_add)
    rm = usub.add_parser("remove", help="remove an account")
    rm.add_argument("name")
    rm.set_defaults(func=cmd_remove)
    ls = usub.add_parser("list", help="list accounts and roles")
    ls.set_defaults(func=cmd_list)
    pw = usub.add_parser("password", help="set an account's password (its sign-ins end)")
    pw.add_argument("name")
    _password_options(pw)
    pw.add_argument("--sso-only", action="store_true", help="no password: signs in only by single sign-on")
    pw.set_defaults(func=cmd_password)
    ro = usub.add_parser("role", help="change an account's role (its sign-ins end)")
    ro.add_argument("name")
    ro.add_argument("role", choices=["admin", "researcher", "annotator"])
    ro.set_defaults(func=cmd_role)
    se = usub.add_parser("sessions", help="list the sign-in sessions in use (all accounts, or one)")
    se.add_argument("name", nargs="?")
    se.set_defaults(func=cmd_sessions)
    so = usub.add_parser("sign-out", help="end every sign-in of an account (password sessions and single sign-on)")
    so.add_argument("name")
    so.set_defaults(func=cmd_sign_out)
    ub = usub.add_parser("unbind", help="forget the single sign-on identity an account is bound to")
    ub.add_argument("name")
    ub.set_defaults(func=cmd_unbind)
    rk = usub.add_parser("rotate-key", help="make a new session signing key: every sign-in of every account ends")
    rk.set_defaults(func=cmd_rotate_key)


def _password_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--password-stdin", action="store_true",
                        help="read the password from standard input (one line) instead of asking")
    parser.add_argument("--password", help=argparse.SUPPRESS)  # refused with a reason (the process list)


def _actor() -> str:
    from cli.context import cli_actor

    return cli_actor()


def _password(args: argparse.Namespace) -> str | None:
    """The password given, asked for (twice), or None for single sign-on only; SystemExit when they differ."""
    if args.sso_only:
        return None
    if args.password is not None:
        raise SystemExit("error: --password would show the password in the process list; type it when asked, or "
                         "pipe it with --password-stdin")
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    password = getpass.getpass("Password: ")
    if getpass.getpass("Repeat: ") != password:
        raise SystemExit("error: the passwords differ")
    return password


def cmd_add(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    password = _password(args)
    try:
        account = open_workspace().accounts.add(args.name, args.role, password, email=args.email)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    open_workspace().audit.record(_actor(), "account.add", account.name, role=account.role, email=account.email)
    print(f"added {account.name} ({account.role}{', ' + account.email if account.email else ''})")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    if not open_workspace().accounts.remove(args.name):
        print(f"error: no account {args.name!r}", file=sys.stderr)
        return 1
    open_workspace().audit.record(_actor(), "account.remove", args.name)
    print(f"removed {args.name}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    for account in open_workspace().accounts.list():
        print(f"{account.name}\t{account.role}\t{account.email or ''}")
    return 0


def cmd_password(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    ws = open_workspace()
    try:
        ws.accounts.set_password(args.name, _password(args))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    ws.audit.record(_actor(), "account.password", args.name, sso_only=bool(args.sso_only))
    print(f"{args.name}: password changed; every sign-in of {args.name} ended")
    return 0


def cmd_role(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    ws = open_workspace()
    try:
        ws.accounts.set_role(args.name, args.role)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    ws.audit.record(_actor(), "account.role", args.name, role=args.role)
    print(f"{args.name}: now {args.role}; every sign-in of {args.name} ended")
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from datetime import datetime

    from cli.context import open_workspace

    ws = open_workspace()
    if args.name and ws.accounts.get(args.name) is None:
        print(f"error: no account {args.name!r}", file=sys.stderr)
        return 1

    def when(ts: float) -> str:
        return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")

    for s in ws.sessions.list(args.name):
        print(f"{s.account}\t{s.ref}\tsigned in {when(s.created_at)}\tlast used {when(s.last_seen)}\t"
              f"until {when(s.expires_at)}\t{s.client or '?'}\t{s.user_agent or ''}")
    return 0


def cmd_sign_out(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    ws = open_workspace()
    if ws.accounts.get(args.name) is None:
        print(f"error: no account {args.name!r}", file=sys.stderr)
        return 1
    ended = ws.sessions.end_all(args.name)
    ws.audit.record(_actor(), "auth.sessions_ended", args.name, sessions=ended)
    print(f"{args.name}: {ended} password session(s) ended; single sign-on sign-ins must sign on again")
    return 0


def cmd_unbind(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    ws = open_workspace()
    if not ws.accounts.unbind_identity(args.name):
        print(f"error: no account {args.name!r}", file=sys.stderr)
        return 1
    ws.audit.record(_actor(), "account.unbind", args.name)
    print(f"{args.name}: no longer bound to a single sign-on identity (the next verified one binds)")
    return 0


def cmd_rotate_key(args: argparse.Namespace) -> int:
    """A new signing key (``PAL_HOME/session.key``) and every sign-in ended: cookies signed with the old key no
    longer verify, and the sessions behind them are gone (single sign-on identities must sign on again)."""
    import os

    from cli.context import open_workspace
    from review.sessions import rotate_key

    ws = open_workspace()
    if os.environ.get("PAL_SESSION_SECRET", "").strip():
        print("note: PAL_SESSION_SECRET is set, so the key comes from it: change it and restart the server",
              file=sys.stderr)
    else:
        rotate_key(ws.paths.session_key)
    ended = ws.sessions.end_everyone()
    ws.audit.record(_actor(), "auth.key_rotated", "*", sessions=ended)
    print(f"new session key; {ended} password session(s) ended; single sign-on sign-ins must sign on again")
    return 0
