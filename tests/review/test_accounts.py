"""Accounts keep only salted bcrypt hashes; `pal users add/remove`."""

import sqlite3

from cli.main import main
from testkit.workspace import make_workspace


def test_passwords_are_stored_only_as_salted_bcrypt_hashes(accounts, db):
    accounts.add("alice", "annotator", "s3cret-pass")
    accounts.add("bob", "annotator", "s3cret-pass")
    hashes = [r[0] for r in sqlite3.connect(db).execute("SELECT password_hash FROM review_accounts")]
    assert all(h.startswith("$2") and "s3cret" not in h for h in hashes) and hashes[0] != hashes[1]
    assert accounts.verify("alice", "s3cret-pass").role == "annotator"
    assert accounts.verify("alice", "wrong-pass") is None and accounts.verify("nobody", "x") is None


def test_cli_adds_and_removes_accounts(db, capsys):
    assert main(["users", "add", "carol", "--role", "admin", "--password", "long-enough"]) == 0
    assert make_workspace(db.parent).accounts.verify("carol", "long-enough").role == "admin"
    assert main(["users", "add", "carol", "--role", "admin", "--password", "long-enough"]) == 1
    assert main(["users", "list"]) == 0 and "carol" in capsys.readouterr().out
    assert main(["users", "remove", "carol"]) == 0
    assert main(["users", "remove", "carol"]) == 1
    assert make_workspace(db.parent).accounts.count() == 0
