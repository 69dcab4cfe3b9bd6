"""Sign-in sessions: hashed at rest, signed cookies, idle and absolute expiry, bound to the password and role,
ended by sign-out, by an admin and by account changes."""

from __future__ import annotations

import sqlite3
import stat

import pytest

from review.sessions import COOKIE, CookieSigner, SessionPolicy, SessionStore, load_key, sso_issued_at

PASSWORD = "correct-horse"


@pytest.fixture
def clock():
    """The sessions' clock, a day ahead of the wall clock the account store stamps changes with: a session issued
    after a change (a role) is newer than it, as on a real server."""
    import time

    return [time.time() + 86_400.0]


@pytest.fixture
def sessions(review_ws, clock):
    review_ws.accounts.add("ann", "annotator", PASSWORD)
    review_ws.accounts.add("boss", "admin", PASSWORD)
    return SessionStore(review_ws.db, review_ws.sessions.signer, SessionPolicy(idle_s=600, absolute_s=3600),
                        clock=lambda: clock[0])


def test_a_session_resolves_to_its_account_and_only_its_hash_is_stored(sessions, review_ws, db):
    cookie = sessions.issue("ann", client="10.0.0.7", user_agent="Firefox")
    assert sessions.resolve(cookie).name == "ann" and sessions.resolve(cookie).role == "annotator"
    token = cookie.split(".")[0]
    stored = sqlite3.connect(db).execute("SELECT id_hash, client, user_agent FROM auth_sessions").fetchall()
    assert len(stored) == 1 and token not in stored[0][0] and stored[0][1:] == ("10.0.0.7", "Firefox")
    assert COOKIE == "pal_session"


@pytest.mark.parametrize("forge", [
    lambda c: c.split(".")[0],  # no signature
    lambda c: c.split(".")[0] + ".AAAA",  # a wrong one
    lambda c: "x" + c,  # another id under the same signature
    lambda c: c + ".extra",
    lambda c: "",
    lambda c: "é" * 10 + ".é",
])
def test_a_forged_or_damaged_cookie_signs_nobody_in(sessions, forge):
    cookie = sessions.issue("boss")
    assert sessions.resolve(forge(cookie)) is None
    assert sessions.resolve(None) is None and sessions.resolve(cookie).name == "boss"


def test_idle_and_absolute_expiry(sessions, clock):
    cookie = sessions.issue("ann")
    for _ in range(5):  # used every 9 minutes: stays (idle 10 min)
        clock[0] += 540
        assert sessions.resolve(cookie) is not None
    clock[0] += 601  # unused for longer than the idle time
    assert sessions.resolve(cookie) is None
    fresh = sessions.issue("ann")
    for _ in range(6):  # however often it is used, the absolute lifetime (1 h) ends it
        clock[0] += 590
        assert sessions.resolve(fresh) is not None
    clock[0] += 590
    assert sessions.resolve(fresh) is None and sessions.list("ann") == []


def test_a_changed_password_or_role_or_a_removed_account_ends_its_sessions(sessions, review_ws):
    accounts = review_ws.accounts
    a, b = sessions.issue("ann"), sessions.issue("boss")
    accounts.set_password("ann", "another-password")
    assert sessions.resolve(a) is None and sessions.resolve(b) is not None
    a = sessions.issue("ann")
    accounts.set_role("ann", "researcher")
    assert sessions.resolve(a) is None
    a = sessions.issue("ann")
    assert sessions.resolve(a).role == "researcher"
    accounts.remove("ann")
    assert sessions.resolve(a) is None


def test_the_binding_holds_even_when_a_change_bypasses_the_store(sessions, db):
    cookie = sessions.issue("boss")
    with sqlite3.connect(db) as conn:  # an admin edits the table by hand: role and hash change, rows stay
        conn.execute("UPDATE review_accounts SET role='annotator' WHERE name='boss'")
    assert sessions.resolve(cookie) is None


def test_sign_out_and_an_admin_ending_sessions(sessions, clock):
    one, two, other = sessions.issue("ann"), sessions.issue("ann"), sessions.issue("boss")
    assert sessions.end(one) and not sessions.end(one)
    assert sessions.resolve(one) is None and sessions.resolve(two) is not None
    assert [s.account for s in sessions.list()] == ["boss", "ann"] or {s.account for s in sessions.list()} == {
        "ann", "boss"}
    clock[0] += 1
    assert sessions.end_all("ann") == 1
    assert sessions.resolve(two) is None and sessions.resolve(other) is not None
    clock[0] += 1
    assert sessions.resolve(sessions.issue("ann")) is not None  # a sign-in after the end works
    ref = sessions.list("boss")[0].ref
    assert sessions.end_ref(ref) and sessions.resolve(other) is None and not sessions.end_ref("nothex")


def test_purge_drops_only_expired_sessions(sessions, clock):
    old = sessions.issue("ann")
    clock[0] += 700
    new = sessions.issue("boss")
    assert sessions.purge() == 1 and sessions.resolve(new) is not None and sessions.resolve(old) is None


def test_the_key_file_is_private_and_shared_by_processes(tmp_path):
    path = tmp_path / "home" / "session.key"
    key = load_key(path, env={})
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(path, env={}) == key  # made once
    assert load_key(path, env={"PAL_SESSION_SECRET": "s" * 40}) != key
    with pytest.raises(ValueError, match="32 characters"):
        load_key(path, env={"PAL_SESSION_SECRET": "short"})
    a, b = CookieSigner(lambda: key), CookieSigner(lambda: load_key(path, env={}))
    assert b.unsign(a.sign("abc")) == "abc" and CookieSigner(lambda: b"x" * 32).unsign(a.sign("abc")) is None


def test_policy_from_the_environment():
    assert SessionPolicy.from_env({"PAL_SESSION_IDLE_MINUTES": "30", "PAL_SESSION_MAX_HOURS": "2"}) == SessionPolicy(
        idle_s=1800, absolute_s=7200)
    assert SessionPolicy.from_env({}) == SessionPolicy()
    with pytest.raises(ValueError, match="PAL_SESSION"):
        SessionPolicy.from_env({"PAL_SESSION_IDLE_MINUTES": "soon"})
    with pytest.raises(ValueError, match="positive"):
        SessionPolicy.from_env({"PAL_SESSION_MAX_HOURS": "0"})


def test_sso_issue_time():
    assert sso_issued_at({"iat": 12}) == 12.0 and sso_issued_at({"iat": "12.5"}) == 12.5
    assert sso_issued_at({}) is None and sso_issued_at({"iat": True}) is None and sso_issued_at({"iat": "x"}) is None


def test_a_home_is_made_private_and_an_existing_one_tightened_with_a_log_line(tmp_path, caplog):
    """PAL_HOME holds password hashes, answers and the audit log: no group or other access."""
    import logging
    import stat

    from backends.paths import make_private
    from testkit.workspace import make_workspace

    home = tmp_path / "pal"
    ws = make_workspace(home)
    ws.accounts.add("ann", "annotator", "long-enough")
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE(ws.paths.runs_db.stat().st_mode) == 0o600
    (home / "old").mkdir()
    (home / "old" / "leak.json").write_text("{}")
    (home / "old" / "leak.json").chmod(0o644)
    home.chmod(0o755)
    (tmp_path / "outside.txt").write_text("x")
    (tmp_path / "outside.txt").chmod(0o644)
    (home / "link").symlink_to(tmp_path / "outside.txt")
    with caplog.at_level(logging.INFO, logger="backends.paths"):
        assert make_private(home) >= 3  # the home, the folder and the file made here (and any store file)
    assert "made private" in caplog.text
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in home.rglob("*") if not p.is_symlink())
    assert stat.S_IMODE((home / "old" / "leak.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "outside.txt").stat().st_mode) == 0o644  # a link is never followed
    assert make_private(home) == 0


def test_a_file_that_vanishes_while_the_home_is_tightened_is_skipped(tmp_path, monkeypatch):
    """Another process (a Ray node, a second app) may close a SQLite database while the walk runs: its -wal file is
    listed and then gone. The start must go on, tightening the rest."""
    import os
    import stat

    from backends.paths import make_private

    home = tmp_path / "pal"
    home.mkdir()
    (home / "runs.sqlite").write_text("x")
    (home / "runs.sqlite").chmod(0o644)
    real_walk = os.walk

    def walk_listing_a_gone_file(top, *args, **kwargs):
        for root, dirs, files in real_walk(top, *args, **kwargs):
            yield root, dirs, [*files, "embeddings.sqlite-wal"]

    monkeypatch.setattr(os, "walk", walk_listing_a_gone_file)
    assert make_private(home) == 2  # the home and runs.sqlite; the vanished -wal is skipped
    assert stat.S_IMODE((home / "runs.sqlite").stat().st_mode) == 0o600
