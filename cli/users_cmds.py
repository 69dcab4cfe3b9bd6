"""``pal users add NAME --role admin|researcher|annotator [--email E]``, ``pal users remove NAME``, ``pal users list``.

Adding and removing accounts is recorded in the audit log (actor ``cli:<OS user>``)."""

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
    add.add_argument("--password", help="the password (default: asked for, twice)")
    add.add_argument("--email", help="the e-mail a single sign-on identity must carry to map to this account")
    add.add_argument("--sso-only", action="store_true", help="no password: signs in only by single sign-on")
    add.set_defaults(func=cmd_add)
    rm = usub.add_parser("remove", help="remove an account")
    rm.add_argument("name")
    rm.set_defaults(func=cmd_remove)
    ls = usub.add_parser("list", help="list accounts and roles")
    ls.set_defaults(func=cmd_list)


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name in this environment (a container without /etc/passwd entry)
        return "cli"


def cmd_add(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    password = args.password
    if args.sso_only:
        password = None
    elif password is None:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Repeat: ") != password:
            print("error: the passwords differ", file=sys.stderr)
            return 1
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
