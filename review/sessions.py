"""Sign-in sessions: what a password sign-in leaves on the server and, in an HttpOnly cookie, in the browser.

A session id is 32 random bytes (URL-safe base64); the store keeps only its SHA-256, so a copy of the database
signs nobody in. The cookie carries the id and an HMAC-SHA256 signature (:class:`CookieSigner`; the key is
``PAL_SESSION_SECRET`` or ``PAL_HOME/session.key``, made with mode 0600 on first use), so a forged or truncated
cookie is refused before the store is read.

A session signs its account in while all of these hold, checked on every use (every run of every page):

* the account exists and its password hash and role are those the session was issued under (``binding``): a
  changed password or role ends every session of the account;
* it was used within its idle time and is younger than its absolute lifetime (:class:`SessionPolicy`, from
  ``PAL_SESSION_IDLE_MINUTES`` and ``PAL_SESSION_MAX_HOURS``);
* it was issued after the account's ``sessions_after`` (an admin ending a person's sessions sets it);
* the connection presents what the sign-in route bound the session to: the page's token (the digest of the XSRF
  token the sign-in form carried, which the page's websocket presents again in ``Sec-WebSocket-Protocol``;
  :func:`ui.web_auth.page_token`) and the origin it signed in from. A session cookie that leaked alone (a log, a
  copied header) signs nobody in. A plain-HTTP server on another port of the same host still receives every cookie
  of the host, the XSRF cookie included: against it stand the websocket's Origin and Host checks
  (:mod:`ui.web_guard`) and, behind TLS, the ``Secure`` :data:`TLS_COOKIE`.

A session that fails an account or time check is deleted; one presented without its page token or from another
origin is only refused (the owner's page still holds both). Identity is never bound to Streamlit's session id (which travels in
upload URLs): a page reads the cookie its own connection brought, on every run.

Behind TLS the cookie is :data:`TLS_COOKIE` (``__Host-``: Secure, path ``/``, no domain), which a plain-HTTP page on
the same host can neither read nor plant; :func:`rotate_key` makes a new signing key and ends every session.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from backends.store.db import Database
from review.accounts import Account

log = logging.getLogger(__name__)
COOKIE = "pal_session"
TLS_COOKIE = "__Host-pal_session"  # the same cookie set over TLS (the browser then enforces Secure, path /, no domain)
TOKEN_BYTES = 32


@dataclass(frozen=True)
class SessionPolicy:
    idle_s: float = 12 * 3600.0  # unused this long: signed out
    absolute_s: float = 7 * 24 * 3600.0  # however used: signed out after this long
    touch_s: float = 60.0  # last use is written at most this often

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SessionPolicy:
        env = os.environ if env is None else env
        try:
            idle = float(env.get("PAL_SESSION_IDLE_MINUTES") or cls.idle_s / 60) * 60
            absolute = float(env.get("PAL_SESSION_MAX_HOURS") or cls.absolute_s / 3600) * 3600
        except ValueError as e:
            raise ValueError(f"PAL_SESSION_IDLE_MINUTES / PAL_SESSION_MAX_HOURS: {e}") from None
        if idle <= 0 or absolute <= 0:
            raise ValueError("PAL_SESSION_IDLE_MINUTES and PAL_SESSION_MAX_HOURS must be positive")
        return cls(idle_s=idle, absolute_s=absolute)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def load_key(path: Path, env: Mapping[str, str] | None = None) -> bytes:
    """The signing key: ``PAL_SESSION_SECRET`` (hashed), else the key file, created (0600) when absent."""
    env = os.environ if env is None else env
    if secret := env.get("PAL_SESSION_SECRET", "").strip():
        if len(secret) < 32:
            raise ValueError("PAL_SESSION_SECRET needs at least 32 characters")
        return hashlib.sha256(secret.encode("utf-8")).digest()
    path = Path(path)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(32))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(staged, path)  # fails when another process made it first: theirs is used
        except FileExistsError:
            pass
        finally:
            staged.unlink()
    key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    if len(key) < 32:
        raise ValueError(f"{path}: the session key is too short; delete the file to make a new one")
    return key


def key_stamp(path: Path) -> tuple[int, int] | None:
    """What changes when the key file is replaced (:func:`rotate_key`): its inode and modification time."""
    try:
        st = Path(path).stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


class CookieSigner:
    """``<id>.<HMAC-SHA256(key, id)>``; the key is read on first use (a read-only home never makes one) and again
    whenever ``stamp`` changes, so a running server signs and verifies with a rotated key at once."""

    def __init__(self, key: Callable[[], bytes], stamp: Callable[[], object] | None = None):
        self._load, self._stamp = key, stamp
        self._key: bytes | None = None
        self._seen: object = None

    def _mac(self, token: str) -> str:
        stamp = self._stamp() if self._stamp is not None else None
        if self._key is None or stamp != self._seen:
            self._key, self._seen = self._load(), stamp
        return _b64(hmac.new(self._key, token.encode("ascii"), hashlib.sha256).digest())

    def sign(self, token: str) -> str:
        return f"{token}.{self._mac(token)}"

    def unsign(self, value: str | None) -> str | None:
        """The id of a cookie whose signature holds; None for anything else."""
        if not value or len(value) > 200 or value.count(".") != 1:
            return None
        token, mac = value.split(".")
        try:
            token.encode("ascii")
            mac.encode("ascii")
        except UnicodeEncodeError:
            return None
        return token if hmac.compare_digest(mac, self._mac(token)) else None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def rotate_key(path: Path) -> None:
    """Replace the signing key file with a new random key (0600), atomically: every cookie signed with the old
    key stops verifying. The caller ends the sessions too (:meth:`SessionStore.end_everyone`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_hex(32))
        f.flush()
        os.fsync(f.fileno())
    os.replace(staged, path)


def binding(password_hash: str, role: str) -> str:
    """What a session is bound to: the account's password hash and role, as they were when it was issued."""
    return hashlib.sha256(f"{password_hash}\0{role}".encode()).hexdigest()


class SessionInfo(BaseModel):
    ref: str  # the first 12 hex digits of the stored hash: names a session in a list, signs nobody in
    account: str
    via: str
    created_at: float
    last_seen: float
    expires_at: float
    client: str | None = None
    user_agent: str | None = None


class SessionStore:
    def __init__(self, db: Database, signer: CookieSigner, policy: SessionPolicy | None = None,
                 clock: Callable[[], float] = time.time):
        self.db, self.signer, self.clock = db, signer, clock
        self.policy = policy or SessionPolicy()

    def issue(self, account: str, *, client: str | None = None, user_agent: str | None = None,
              via: str = "password", page: str | None = None, origin: str | None = None) -> str:
        """A new session of ``account``; returns the cookie value (raises KeyError for an unknown account).
        ``page`` (a page token's digest) and ``origin`` bind it: every use must present both again."""
        token = _b64(secrets.token_bytes(TOKEN_BYTES))
        now = self.clock()
        with self.db.write() as conn:
            row = conn.execute("SELECT role, password_hash FROM review_accounts WHERE name=?", (account,)).fetchone()
            if row is None:
                raise KeyError(f"no account {account!r}")
            conn.execute("INSERT INTO auth_sessions (id_hash, account, binding, via, created_at, last_seen, expires_at,"
                         " idle_s, client, user_agent, page_token, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (_digest(token), account, binding(row["password_hash"], row["role"]), via, now, now,
                          now + self.policy.absolute_s, self.policy.idle_s, client, (user_agent or "")[:200] or None,
                          page, _origin(origin)))
        return self.signer.sign(token)

    def resolve(self, cookie: str | None, *, page: str | None = None, origin: str | None = None) -> Account | None:
        """The account a cookie signs in, or None (a session that fails an account or time check is deleted; one
        bound to a page token or an origin that this connection does not present is refused and kept)."""
        token = self.signer.unsign(cookie)
        if token is None:
            return None
        key = _digest(token)
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT s.binding, s.created_at, s.last_seen, s.expires_at, s.idle_s, s.page_token, s.origin, a.name, "
                "a.role, a.email, a.password_hash, a.sessions_after FROM auth_sessions s "
                "JOIN review_accounts a ON a.name = s.account WHERE s.id_hash=?", (key,)).fetchone()
        if row is None:
            return None
        if not _presents(row["page_token"], page) or not _presents(row["origin"], _origin(origin)):
            log.warning("a session cookie came without its page token or from another origin (%r): refused", origin)
            return None
        now = self.clock()
        valid = (hmac.compare_digest(row["binding"], binding(row["password_hash"], row["role"]))
                 and now <= row["expires_at"] and now - row["last_seen"] <= row["idle_s"]
                 and row["created_at"] > row["sessions_after"])
        if not valid:
            with self.db.write() as conn:
                conn.execute("DELETE FROM auth_sessions WHERE id_hash=?", (key,))
            return None
        if now - row["last_seen"] >= self.policy.touch_s:
            with self.db.write() as conn:
                conn.execute("UPDATE auth_sessions SET last_seen=? WHERE id_hash=?", (now, key))
        return Account(name=row["name"], role=row["role"], email=row["email"])

    def end(self, cookie: str | None) -> bool:
        """Sign out: the session of this cookie ends (True when there was one)."""
        token = self.signer.unsign(cookie)
        if token is None:
            return False
        with self.db.write() as conn:
            return conn.execute("DELETE FROM auth_sessions WHERE id_hash=?", (_digest(token),)).rowcount == 1

    def end_all(self, account: str) -> int:
        """End every sign-in of ``account``: its password sessions, and single sign-on identities signed in before
        now (they must sign on again). Returns the number of password sessions ended."""
        with self.db.write() as conn:
            conn.execute("UPDATE review_accounts SET sessions_after=? WHERE name=?", (self.clock(), account))
            return conn.execute("DELETE FROM auth_sessions WHERE account=?", (account,)).rowcount

    def end_everyone(self) -> int:
        """End every sign-in of every account (after a new signing key): all password sessions, and single
        sign-on identities signed in before now. Returns the number of password sessions ended."""
        with self.db.write() as conn:
            conn.execute("UPDATE review_accounts SET sessions_after=?", (self.clock(),))
            return conn.execute("DELETE FROM auth_sessions").rowcount

    def end_ref(self, ref: str) -> bool:
        """End the one session a list names (``ref``: the first 12 hex digits of its hash)."""
        if len(ref) != 12 or any(c not in "0123456789abcdef" for c in ref):
            return False
        with self.db.write() as conn:
            return conn.execute("DELETE FROM auth_sessions WHERE substr(id_hash, 1, 12)=?", (ref,)).rowcount >= 1

    def list(self, account: str | None = None) -> list[SessionInfo]:
        """Sessions not yet expired, newest use first."""
        now = self.clock()
        sql = ("SELECT id_hash, account, via, created_at, last_seen, expires_at, idle_s, client, user_agent "
               "FROM auth_sessions WHERE expires_at >= ? AND last_seen + idle_s >= ?")
        args: list[object] = [now, now]
        if account is not None:
            sql, args = sql + " AND account=?", [*args, account]
        with self.db.read() as conn:
            rows = conn.execute(sql + " ORDER BY last_seen DESC", args).fetchall()
        return [SessionInfo(ref=r["id_hash"][:12], account=r["account"], via=r["via"], created_at=r["created_at"],
                            last_seen=r["last_seen"], expires_at=r["expires_at"], client=r["client"],
                            user_agent=r["user_agent"]) for r in rows]

    def purge(self) -> int:
        """Delete expired sessions (they are refused anyway); returns how many."""
        now = self.clock()
        with self.db.write() as conn:
            return conn.execute("DELETE FROM auth_sessions WHERE expires_at < ? OR last_seen + idle_s < ?",
                                (now, now)).rowcount


def _origin(origin: str | None) -> str | None:
    return origin.strip().rstrip("/").lower() or None if origin else None


def _presents(bound: str | None, presented: str | None) -> bool:
    """A session bound to nothing (issued outside the sign-in route) needs nothing; else the same value."""
    return bound is None or (presented is not None and hmac.compare_digest(bound, presented))


def sso_issued_at(claims: Mapping[str, object]) -> float | None:
    """When a single sign-on identity signed in (its ID token's ``iat``), if it says."""
    iat = claims.get("iat")
    if isinstance(iat, bool) or not isinstance(iat, (int, float, str)):
        return None
    with contextlib.suppress(ValueError):
        return float(iat)
    return None
