"""The audit log: who did what to which target, and when (memory edits and forgets, batches, settings,
accounts). Rows are only ever added; admins read and export them on the Audit page."""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, Field

from backends.store.db import Database

# the actions recorded (a closed list, so an export can be read without the code)
ACTIONS: dict[str, str] = {
    "memory.edit": "edited a memory item (the previous text is kept as a version)",
    "memory.forget": "forgot memory items and everything derived from them",
    "runs.discard": "discarded a simulation run with its judgments and simulator fidelity (to record it anew)",
    "review.batch_create": "created a review batch",
    "review.batch_delete": "deleted a review batch",
    "review.batch_join": "took every item of a review batch to annotate",
    "settings.override": "changed a role's LLM settings for their browser session",
    "settings.reset": "reset a role's LLM settings to the configured ones",
    "settings.local_server": "started or stopped the bundled local model server",
    "account.add": "added an account",
    "account.remove": "removed an account",
    "account.password": "changed an account's password (its sign-ins ended)",
    "account.role": "changed an account's role (its sign-ins ended)",
    "account.unbind": "unbound an account from its single sign-on identity",
    "bundle.import": "imported a workspace bundle into this home",
    "bundle.present": "opened a workspace bundle for presenting (read-only)",
    "auth.sign_in": "signed in",
    "auth.sign_out": "signed out",
    "auth.sessions_ended": "ended a person's sign-ins",
    "auth.refused": "was refused access (an unknown or unverified single sign-on identity)",
    "auth.sign_in_failed": "a password sign-in failed (the name tried and the address are kept)",
    "auth.key_rotated": "made a new session signing key (every sign-in ended)",
}


class AuditEntry(BaseModel):
    id: int = 0
    ts: float = Field(default_factory=time.time)
    actor: str
    action: str
    target: str
    detail: dict[str, Any] = Field(default_factory=dict)


class AuditStore:
    def __init__(self, db: Database):
        self.db = db

    def record(self, actor: str, action: str, target: str, **detail: Any) -> AuditEntry:
        if action not in ACTIONS:
            raise ValueError(f"unknown audit action {action!r} (actions: {', '.join(ACTIONS)})")
        entry = AuditEntry(actor=actor, action=action, target=target, detail=detail)
        with self.db.write() as conn:
            cur = conn.execute("INSERT INTO audit_log (ts, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)",
                               (entry.ts, actor, action, target, json.dumps(detail, ensure_ascii=False, default=str)))
            entry.id = int(cur.lastrowid or 0)
        return entry

    def entries(self, limit: int = 1000, actor: str | None = None, action: str | None = None) -> list[AuditEntry]:
        """Newest first."""
        sql = "SELECT id, ts, actor, action, target, detail FROM audit_log WHERE 1=1"
        args: list[object] = []
        if actor:
            sql, args = sql + " AND actor=?", [*args, actor]
        if action:
            sql, args = sql + " AND action=?", [*args, action]
        with self.db.read() as conn:
            rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", [*args, limit]).fetchall()
        return [AuditEntry(id=r[0], ts=r[1], actor=r[2], action=r[3], target=r[4], detail=json.loads(r[5]))
                for r in rows]
