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


def test_a_stored_hash_has_bcrypts_default_cost(accounts, db, bcrypt_default_cost):
    """The suite hashes at bcrypt's lowest cost (tests/conftest.py); the product keeps bcrypt's default, 12."""
    accounts.add("alice", "annotator", "s3cret-pass")
    (stored,) = [r[0] for r in sqlite3.connect(db).execute("SELECT password_hash FROM review_accounts")]
    assert int(stored.split("$")[2]) >= 12
    assert accounts.verify("alice", "s3cret-pass").role == "annotator"


def _stdin(monkeypatch, text: str) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(text + "\n"))


def test_cli_adds_and_removes_accounts(db, capsys, monkeypatch):
    _stdin(monkeypatch, "long-enough")
    assert main(["users", "add", "carol", "--role", "admin", "--password-stdin"]) == 0
    assert make_workspace(db.parent).accounts.verify("carol", "long-enough").role == "admin"
    _stdin(monkeypatch, "long-enough")
    assert main(["users", "add", "carol", "--role", "admin", "--password-stdin"]) == 1
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
    assert t.wait_s("alice", "10.0.0.9") == pytest.approx(2.0)  # three free failures; the name backs off anywhere
    assert t.wait_s("bob", "10.0.0.1") == pytest.approx(2.0)  # the client backs off for any name
    assert t.wait_s("bob", "10.0.0.9") == 0
    now[0] += 2.0
    t.failed("alice", "10.0.0.1")
    assert t.wait_s("ALICE", None) == pytest.approx(4.0)  # doubles; names are case-insensitive
    for _ in range(10):
        t.failed("alice", "10.0.0.1")
    assert t.wait_s("alice", None) == pytest.approx(30.0)  # capped
    t.succeeded("alice", "10.0.0.1")
    assert t.wait_s("alice", "10.0.0.9") == 0
    t.failed("ghost", "10.0.0.2")  # unknown names back off exactly alike
    assert t.wait_s("ghost", None) == t.wait_s("ghost", None) == 0


def test_exactly_five_failures_are_free_as_the_readme_says():
    """Audit finding 25: the sixth attempt was still checked at once (six failures before any wait)."""
    t = SignInThrottle(clock=lambda: 0.0)
    for attempt in range(5):
        assert t.wait_s("alice", "10.0.0.1") == 0, attempt
        t.failed("alice", "10.0.0.1")
    assert t.wait_s("alice", "10.0.0.1") == pytest.approx(1.0)


def test_a_success_does_not_clear_the_address_so_one_account_cannot_launder_a_spray():
    """Audit finding 11: an attacker with one valid account signed in between guesses and the address's
    failures were forgotten each time (about 6 guesses a second against other names)."""
    t = SignInThrottle(clock=lambda: 0.0)
    for victim in ("alice", "bob", "carol", "dan", "erin"):
        t.failed(victim, "203.0.113.9")
        t.succeeded("mallory", "203.0.113.9")  # the attacker's own account
    assert t.wait_s("frank", "203.0.113.9") == pytest.approx(1.0)
    assert t.wait_s("frank", "198.51.100.1") == 0


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


def test_a_changed_password_or_role_takes_effect_and_is_checked(accounts):
    accounts.add("ann", "annotator", "first-password")
    accounts.set_password("ann", "second-password")
    assert accounts.verify("ann", "first-password") is None and accounts.verify("ann", "second-password").name == "ann"
    assert accounts.sso_after("ann") == 0  # a new password ends password sessions only
    accounts.set_role("ann", "researcher")
    assert accounts.get("ann").role == "researcher"
    assert accounts.sso_after("ann") > 0  # a new role signs out single sign-on too: an open page of the old role stops
    with pytest.raises(ValueError, match="8 characters"):
        accounts.set_password("ann", "short")
    with pytest.raises(ValueError, match="role must be"):
        accounts.set_role("ann", "owner")
    with pytest.raises(ValueError, match="no account"):
        accounts.set_role("nobody", "admin")
    accounts.set_password("ann", None)
    assert accounts.verify("ann", "second-password") is None


ISSUER = "https://idp.lab.example"


def test_single_sign_on_needs_a_verified_email(accounts):
    """Audit finding 2: a provider user ``sub=mallory`` with ``email=alice@lab.example`` and ``email_verified=false``
    signed in as alice, an admin."""
    accounts.add("alice", "admin", None, email="alice@lab.example")
    assert accounts.for_identity(ISSUER, "mallory", "alice@lab.example", False) == (
        None, "the provider has not verified this e-mail address")
    assert accounts.for_identity(ISSUER, "mallory", "alice@lab.example", None)[0] is None  # no claim: unverified
    assert accounts.for_identity(ISSUER, "mallory", "alice@lab.example", "false")[0] is None
    account, why = accounts.for_identity(ISSUER, "alice-sub", "Alice@Lab.example", "true")
    assert account.name == "alice" and why == ""


def test_a_linked_account_belongs_to_its_issuer_and_subject(accounts):
    accounts.add("alice", "admin", None, email="alice@lab.example")
    assert accounts.for_identity(ISSUER, "alice-sub", "alice@lab.example", True)[0].name == "alice"
    # another identity later carrying alice's (even verified) e-mail: another provider, or a recycled address
    assert accounts.for_identity("https://other.example", "alice-sub", "alice@lab.example", True) == (
        None, "this account is bound to another single sign-on identity")
    assert accounts.for_identity(ISSUER, "mallory", "alice@lab.example", True)[0] is None
    # the bound identity signs in even after its e-mail changed at the provider
    assert accounts.for_identity(ISSUER, "alice-sub", "alice@new.example", False)[0].name == "alice"
    assert accounts.unbind_identity("alice") and not accounts.unbind_identity("nobody")
    assert accounts.for_identity(ISSUER, "alice-sub", "alice@lab.example", False)[0] is None
    assert accounts.for_identity(ISSUER, "", "alice@lab.example", True)[0] is None
    assert accounts.for_identity(ISSUER, "x", "nobody@lab.example", True) == (None, "no account has this e-mail address")


def test_a_password_on_the_command_line_is_refused_with_the_reason(db, capsys):
    """The process list shows every argument to every user of the machine."""
    with pytest.raises(SystemExit, match="process list"):
        main(["users", "add", "carol", "--role", "admin", "--password", "long-enough"])
    assert make_workspace(db.parent).accounts.count() == 0


def test_rotate_key_ends_every_sign_in_and_old_cookies_stop_verifying(db, capsys, monkeypatch):
    monkeypatch.delenv("PAL_SESSION_SECRET", raising=False)
    ws = make_workspace(db.parent)
    ws.accounts.add("ann", "annotator", "long-enough")
    ws.accounts.add("bob", "admin", "long-enough")
    cookies = [ws.sessions.issue("ann"), ws.sessions.issue("bob")]
    old_key = ws.paths.session_key.read_text()
    assert main(["users", "rotate-key"]) == 0 and "2 password session(s) ended" in capsys.readouterr().out
    assert ws.paths.session_key.read_text() != old_key
    assert oct(ws.paths.session_key.stat().st_mode & 0o777) == "0o600"
    fresh = make_workspace(db.parent)  # a server started after the rotation
    assert all(fresh.sessions.resolve(c) is None and ws.sessions.resolve(c) is None for c in cookies)
    assert fresh.sessions.signer.unsign(cookies[0]) is None  # the old signature no longer verifies
    assert fresh.sessions.resolve(ws.sessions.issue("ann")).name == "ann"  # the running server signs with the new key
    assert [e.action for e in fresh.audit.entries()][0] == "auth.key_rotated"


def test_cli_changes_passwords_and_roles_lists_and_ends_sessions(db, capsys, monkeypatch):
    _stdin(monkeypatch, "long-enough")
    assert main(["users", "add", "ann", "--role", "annotator", "--password-stdin"]) == 0
    ws = make_workspace(db.parent)
    cookie = ws.sessions.issue("ann", client="10.0.0.7")
    assert main(["users", "sessions"]) == 0 and "ann\t" in capsys.readouterr().out
    _stdin(monkeypatch, "new-long-enough")
    assert main(["users", "password", "ann", "--password-stdin"]) == 0
    assert ws.sessions.resolve(cookie) is None
    cookie = ws.sessions.issue("ann")
    assert main(["users", "role", "ann", "researcher"]) == 0 and ws.sessions.resolve(cookie) is None
    cookie = ws.sessions.issue("ann")
    assert main(["users", "sign-out", "ann"]) == 0 and ws.sessions.resolve(cookie) is None
    assert "1 password session(s) ended" in capsys.readouterr().out
    assert main(["users", "sign-out", "nobody"]) == 1 and main(["users", "role", "nobody", "admin"]) == 1
    assert main(["users", "unbind", "ann"]) == 0
    actions = [e.action for e in ws.audit.entries()]
    assert actions[:4] == ["account.unbind", "auth.sessions_ended", "account.role", "account.password"]


def test_the_throttle_counts_an_attempt_before_its_check_and_waits_from_the_checks_end():
    now = [0.0]
    t = SignInThrottle(base_s=10, clock=lambda: now[0])
    assert [t.begin("x", "10.0.0.1") for _ in range(7)] == [0.0] * 5 + [10.0, 10.0]  # the sixth waits, unchecked
    now[0] = 3.0  # the fifth check ends 3 s later, still wrong: its wait runs from there
    t.confirm_failed("x", "10.0.0.1")
    assert t.begin("x", "10.0.0.1") == 10.0
    now[0] = 13.0
    assert t.begin("y", "10.0.0.2") == 0.0 and t.begin("x", "10.0.0.1") == 0.0
    t.succeeded("x", "10.0.0.1", begun=True)  # a right password: the name is cleared, the address keeps its five
    assert t.wait_s("x", None) == 0.0 and t.begin("z", "10.0.0.1") == 10.0  # and gets back only its own attempt
