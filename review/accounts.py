"""Review accounts: a name, a role (admin or annotator) and a salted bcrypt hash of the password, nothing else."""

from __future__ import annotations

import time
from typing import Literal

import bcrypt
from pydantic import BaseModel

from backends.store.db import Database

Role = Literal["admin", "annotator"]
ROLES: tuple[str, ...] = ("admin", "annotator")
LOCAL_ADMIN = "local"


class Account(BaseModel):
    name: str
    role: Role

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def hash_password(password: str) -> str:
    return bcrypt.hashpw(password.encode("utf-8"), bcrypt.gensalt()).decode("ascii")


class AccountStore:
    def __init__(self, db: Database):
        self.db = db

    def add(self, name: str, role: str, password: str) -> Account:
        name = name.strip()
        if not name or len(name) > 64 or any(c.isspace() for c in name):
            raise ValueError("account names are 1–64 characters without spaces")
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        if len(password) < 8:
            raise ValueError("passwords need at least 8 characters")
        with self.db.write() as conn:
            if conn.execute("SELECT 1 FROM review_accounts WHERE name=?", (name,)).fetchone():
                raise ValueError(f"account {name!r} exists")
            conn.execute("INSERT INTO review_accounts VALUES (?, ?, ?, ?)", (name, role, hash_password(password), time.time()))
        return Account(name=name, role=role)

    def remove(self, name: str) -> bool:
        with self.db.write() as conn:
            return conn.execute("DELETE FROM review_accounts WHERE name=?", (name,)).rowcount == 1

    def list(self) -> list[Account]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT name, role FROM review_accounts ORDER BY name").fetchall()
        return [Account(name=r[0], role=r[1]) for r in rows]

    def count(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM review_accounts").fetchone()[0])

    def verify(self, name: str, password: str) -> Account | None:
        """The account when the password matches its hash; None otherwise (same answer for unknown names)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT name, role, password_hash FROM review_accounts WHERE name=?",
                               (name.strip(),)).fetchone()
        if row is None:
            bcrypt.checkpw(b"x", hash_password("timing-equaliser").encode("ascii"))  # same cost as a real check
            return None
        if not bcrypt.checkpw(password.encode("utf-8"), row[2].encode("ascii")):
            return None
        return Account(name=row[0], role=row[1])

    def get(self, name: str) -> Account | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT name, role FROM review_accounts WHERE name=?", (name,)).fetchone()
        return Account(name=row[0], role=row[1]) if row else None
