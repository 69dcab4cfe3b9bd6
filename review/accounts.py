"""Accounts: a name, a role, an optional e-mail (single sign-on) and a salted bcrypt hash of the password.

Roles: ``admin`` (everything: accounts, settings, endpoints), ``researcher`` (every research page; no
accounts, no keys) and ``annotator`` (Review: their own assignments only); :mod:`review.access` says
which pages each may open.

Sign-in answers alike for an unknown name and a wrong password, at the same cost: an unknown name is
checked against one precomputed dummy hash. bcrypt reads at most 72 bytes; a longer password is first
reduced to a SHA-256 digest (base64, 44 bytes), so every byte of it counts and none raises.

Changing an account's password ends its password sign-ins, changing its role every sign-in, single sign-on
included (:mod:`review.sessions`). A single sign-on identity
maps to an account by a *verified* e-mail the first time, and the account is then bound to that identity's
issuer and subject: another identity carrying the same e-mail later is refused (:meth:`AccountStore.for_identity`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import time
from typing import Literal

import bcrypt
from pydantic import BaseModel

from backends.store.db import Database

Role = Literal["admin", "researcher", "annotator"]
ROLES: tuple[str, ...] = ("admin", "researcher", "annotator")
LOCAL_ADMIN = "local"
BCRYPT_MAX_BYTES = 72
NO_PASSWORD = "!"  # the stored hash of an account that signs in only through single sign-on


class Account(BaseModel):
    name: str
    role: Role
    email: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def is_annotator(self) -> bool:
        return self.role == "annotator"


def _secret(password: str) -> bytes:
    raw = password.encode("utf-8")
    if len(raw) <= BCRYPT_MAX_BYTES:
        return raw
    return base64.b64encode(hashlib.sha256(raw).digest())


def hash_password(password: str) -> str:
    return bcrypt.hashpw(_secret(password), bcrypt.gensalt()).decode("ascii")


@functools.cache
def _dummy_hash() -> bytes:
    """The hash an unknown name is checked against (made once per process)."""
    return hash_password("timing-equaliser-for-unknown-names").encode("ascii")


def _matches(password: str, stored: str | None) -> bool:
    """One bcrypt check, whatever ``stored`` is (an unusable hash is checked against the dummy)."""
    usable = stored is not None and stored.startswith("$2")
    ok = bcrypt.checkpw(_secret(password), stored.encode("ascii") if stored is not None and usable else _dummy_hash())
    return ok and usable


def _normal_email(email: str | None) -> str | None:
    email = (email or "").strip().lower()
    if not email:
        return None
    if "@" not in email or len(email) > 254 or any(c.isspace() for c in email):
        raise ValueError(f"{email!r} is not an e-mail address")
    return email


def _verified(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _row(r) -> Account:
    return Account(name=r["name"], role=r["role"], email=r["email"])


class AccountStore:
    def __init__(self, db: Database):
        self.db = db

    def add(self, name: str, role: str, password: str | None, email: str | None = None) -> Account:
        """Add an account; ``password=None`` makes one that signs in only by single sign-on (needs ``email``)."""
        name = name.strip()
        if not name or len(name) > 64 or any(c.isspace() for c in name):
            raise ValueError("account names are 1–64 characters without spaces")
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        email = _normal_email(email)
        if password is None and email is None:
            raise ValueError("an account without a password needs an e-mail address (single sign-on)")
        if password is not None and len(password) < 8:
            raise ValueError("passwords need at least 8 characters")
        stored = NO_PASSWORD if password is None else hash_password(password)
        with self.db.write() as conn:
            if conn.execute("SELECT 1 FROM review_accounts WHERE name=?", (name,)).fetchone():
                raise ValueError(f"account {name!r} exists")
            if email and conn.execute("SELECT 1 FROM review_accounts WHERE email=?", (email,)).fetchone():
                raise ValueError(f"another account has the e-mail {email}")
            conn.execute("INSERT INTO review_accounts (name, role, password_hash, created_at, email) "
                         "VALUES (?, ?, ?, ?, ?)", (name, role, stored, time.time(), email))
        return Account(name=name, role=role, email=email)

    def remove(self, name: str) -> bool:
        with self.db.write() as conn:
            return conn.execute("DELETE FROM review_accounts WHERE name=?", (name,)).rowcount == 1

    def list(self) -> list[Account]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT name, role, email FROM review_accounts ORDER BY name").fetchall()
        return [_row(r) for r in rows]

    def count(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM review_accounts").fetchone()[0])

    def verify(self, name: str, password: str) -> Account | None:
        """The account when the password matches its hash; None otherwise — same answer and one bcrypt check
        for an unknown name, a wrong password and an account without a password."""
        with self.db.read() as conn:
            row = conn.execute("SELECT name, role, email, password_hash FROM review_accounts WHERE name=?",
                               (name.strip(),)).fetchone()
        if not _matches(password, row["password_hash"] if row else None):
            return None
        return _row(row)

    def get(self, name: str) -> Account | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT name, role, email FROM review_accounts WHERE name=?", (name,)).fetchone()
        return _row(row) if row else None

    def set_password(self, name: str, password: str | None) -> None:
        """A new password (None: single sign-on only); the account's password sessions end (a single sign-on
        identity keeps signing in: its role is re-read on every run)."""
        if password is not None and len(password) < 8:
            raise ValueError("passwords need at least 8 characters")
        stored = NO_PASSWORD if password is None else hash_password(password)
        self._change(name, "password_hash", stored)

    def set_role(self, name: str, role: str) -> None:
        """A new role; every sign-in of the account ends, single sign-on included (the pages it may open changed,
        and a page left open under the old role must not act for it)."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        self._change(name, "role", role)

    def _change(self, name: str, column: str, value: str) -> None:
        assert column in ("password_hash", "role")
        with self.db.write() as conn:
            if conn.execute(f"UPDATE review_accounts SET {column}=? WHERE name=?", (value, name)).rowcount != 1:
                raise ValueError(f"no account {name!r}")
            conn.execute("DELETE FROM auth_sessions WHERE account=?", (name,))
            if column == "role":  # single sign-on identities signed in before now sign on again
                conn.execute("UPDATE review_accounts SET sessions_after=? WHERE name=?", (time.time(), name))

    def sso_after(self, name: str) -> float:
        """Single sign-on identities signed in before this time (seconds since the epoch) are signed out."""
        with self.db.read() as conn:
            row = conn.execute("SELECT sessions_after FROM review_accounts WHERE name=?", (name,)).fetchone()
        return float(row["sessions_after"]) if row else 0.0

    def for_identity(self, issuer: str, subject: str, email: str | None, email_verified: object
                     ) -> tuple[Account | None, str]:
        """The account a single sign-on identity signs in as, and why not when None.

        An identity already bound (issuer + subject) is that account. Otherwise its e-mail must be verified by the
        provider and belong to an account not bound to another identity; that account is then bound to it."""
        if not issuer or not subject:
            return None, "the identity has no issuer or subject"
        with self.db.read() as conn:
            row = conn.execute("SELECT name, role, email FROM review_accounts WHERE sso_issuer=? AND sso_subject=?",
                               (issuer, subject)).fetchone()
        if row is not None:
            return _row(row), ""
        if not _verified(email_verified):
            return None, "the provider has not verified this e-mail address"
        try:
            normal = _normal_email(email)
        except ValueError:
            normal = None
        if normal is None:
            return None, "the identity carries no e-mail address"
        with self.db.write() as conn:
            row = conn.execute("SELECT name, role, email, sso_subject FROM review_accounts WHERE email=?",
                               (normal,)).fetchone()
            if row is None:
                return None, "no account has this e-mail address"
            if row["sso_subject"] is not None:
                return None, "this account is bound to another single sign-on identity"
            conn.execute("UPDATE review_accounts SET sso_issuer=?, sso_subject=? WHERE name=?",
                         (issuer, subject, row["name"]))
        return _row(row), ""

    def unbind_identity(self, name: str) -> bool:
        """Forget the single sign-on identity an account is bound to (the next verified one binds again)."""
        with self.db.write() as conn:
            return conn.execute("UPDATE review_accounts SET sso_issuer=NULL, sso_subject=NULL WHERE name=?",
                                (name,)).rowcount == 1

    def by_email(self, email: str | None) -> Account | None:
        """The account a single sign-on identity maps to (e-mail, case-insensitive); None for unknown ones."""
        try:
            email = _normal_email(email)
        except ValueError:
            return None
        if email is None:
            return None
        with self.db.read() as conn:
            row = conn.execute("SELECT name, role, email FROM review_accounts WHERE email=?", (email,)).fetchone()
        return _row(row) if row else None
