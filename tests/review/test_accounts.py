"""Accounts keep only salted bcrypt hashes; `pal users add/remove`."""

import sqlite3

import pytest

from cli.main import main
from review.throttle import SignInThrottle
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


def _count_checks(monkeypatch):
    import review.accounts as mod

    calls = []
    real = mod.bcrypt.checkpw

    def counting(pw, hashed):
        calls.append(hashed)
        return real(pw, hashed)

    monkeypatch.setattr(mod.bcrypt, "checkpw", counting)
    return calls


def test_unknown_names_and_wrong_passwords_cost_one_check_and_answer_alike(accounts, monkeypatch):
    accounts.add("alice", "annotator", "s3cret-pass")
    accounts.add("sso", "researcher", None, email="Sso@Lab.example")
    calls = _count_checks(monkeypatch)
    answers = [accounts.verify(n, p) for n, p in (("alice", "wrong-pass"), ("nobody", "wrong-pass"),
                                                  ("sso", "anything-at-all"), ("sso", "!"))]
    assert answers == [None, None, None, None] and len(calls) == 4
    assert calls[1] == calls[2] == calls[3] != calls[0]  # the one precomputed dummy hash


def test_passwords_longer_than_72_bytes_work_fully_and_never_raise(accounts):
    long = "长" * 40 + "-tail"  # 125 bytes in UTF-8
    accounts.add("lin", "researcher", long)
    assert accounts.verify("lin", long).role == "researcher"
    assert accounts.verify("lin", "长" * 40 + "-tall") is None  # bytes past 72 count
    assert accounts.verify("alice-not-there", "x" * 500) is None
    accounts.add("short", "annotator", "eight-ch")
    assert accounts.verify("short", "eight-ch" + "x" * 100) is None


def test_single_sign_on_identities_map_to_accounts_by_email(accounts):
    accounts.add("ann", "annotator", None, email="Ann@Lab.example")
    assert accounts.by_email("ann@lab.EXAMPLE").name == "ann" and accounts.by_email("eve@lab.example") is None
    assert accounts.by_email(None) is None and accounts.by_email("not an email") is None
    with pytest.raises(ValueError, match="e-mail"):
        accounts.add("ann2", "annotator", None, email="ann@lab.example")
    with pytest.raises(ValueError, match="needs an e-mail"):
        accounts.add("nobody", "annotator", None)


def test_backoff_after_repeated_failures_per_name_and_per_client():
    now = [100.0]
    t = SignInThrottle(free=3, base_s=2.0, cap_s=30.0, clock=lambda: now[0])
    for _ in range(3):
        assert t.wait_s("alice", "10.0.0.1") == 0
        t.failed("alice", "10.0.0.1")
    assert t.wait_s("alice", "10.0.0.1") == 0  # three free failures
    t.failed("alice", "10.0.0.1")
    assert t.wait_s("alice", "10.0.0.9") == pytest.approx(2.0)  # the name backs off from any client
    assert t.wait_s("bob", "10.0.0.1") == pytest.approx(2.0)  # the client backs off for any name
    assert t.wait_s("bob", "10.0.0.9") == 0
    now[0] += 2.0
    t.failed("alice", "10.0.0.1")
    assert t.wait_s("ALICE", None) == pytest.approx(4.0)  # doubles; names are case-insensitive
    for _ in range(10):
        t.failed("alice", "10.0.0.1")
    assert t.wait_s("alice", None) == pytest.approx(30.0)  # capped
    t.succeeded("alice", "10.0.0.1")
    assert t.wait_s("alice", "10.0.0.1") == 0
    t.failed("ghost", "10.0.0.2")  # unknown names back off exactly alike
    assert t.wait_s("ghost", None) == t.wait_s("ghost", None) == 0


def test_a_bounded_throttle_drops_the_oldest_entries():
    now = [0.0]
    t = SignInThrottle(clock=lambda: now[0], max_keys=10)
    for i in range(50):
        now[0] += 1
        t.failed(f"n{i}", None)
    assert len(t._failures) <= 10


def test_cli_records_who_added_and_removed_accounts(db, capsys):

    assert main(["users", "add", "res", "--role", "researcher", "--email", "Res@Lab.example", "--sso-only"]) == 0
    assert make_workspace(db.parent).accounts.by_email("res@lab.example").role == "researcher"
    assert main(["users", "remove", "res"]) == 0
    log = make_workspace(db.parent).audit.entries()
    assert [(e.action, e.target) for e in log] == [("account.remove", "res"), ("account.add", "res")]
    assert log[1].actor.startswith("cli") and log[1].detail["role"] == "researcher" and log[0].ts >= log[1].ts
