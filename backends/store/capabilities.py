"""What each endpoint + model can do, learned by negotiation and by ``pal llm check`` (table ``llm_capabilities``).

Keyed by the endpoint as shown (no credentials) and the model name, so every role, browser session and
process that talks to the same model shares one negotiation.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, Field

from backends.store.db import Database

_BOOLS = ("streaming", "seed_honoured", "emits_reasoning")


class Capabilities(BaseModel):
    endpoint: str
    model: str
    structured_mode: str | None = None  # the mode structured calls use (negotiated)
    structured_note: str | None = None  # why: e.g. "json_schema rejected (400): …"
    modes: dict[str, str] = Field(default_factory=dict)  # mode → "ok" or why it failed (pal llm check)
    context_window: int | None = None
    window_source: str | None = None
    streaming: bool | None = None
    seed_honoured: bool | None = None
    emits_reasoning: bool | None = None
    checked_at: float | None = None
    # tokens/s of one request while every slot is busy (backends.llm.rates), measured at rates_at
    prompt_rate: float | None = None
    decode_rate: float | None = None
    rate_slots: int | None = None
    rates_at: float | None = None
    updated_at: float = 0.0


def _row(row: Any) -> Capabilities:
    data = dict(row)
    data["modes"] = json.loads(data.get("modes") or "{}")
    for key in _BOOLS:
        data[key] = None if data[key] is None else bool(data[key])
    return Capabilities.model_validate(data)


class CapabilityStore:
    """Rows of ``llm_capabilities`` in the run store's file (the run store migrates it)."""

    def __init__(self, db: Database):
        self.db = db

    def get(self, endpoint: str, model: str) -> Capabilities | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT * FROM llm_capabilities WHERE endpoint = ? AND model = ?",
                               (endpoint, model)).fetchone()
        return _row(row) if row else None

    def update(self, endpoint: str, model: str, **fields: Any) -> Capabilities:
        """Set ``fields`` (others keep their value) and return the row. The row is read and written in one
        transaction, so two processes updating different fields of one endpoint both keep theirs."""
        with self.db.write() as conn:
            current = self.get(endpoint, model) or Capabilities(endpoint=endpoint, model=model)  # reads in conn
            merged = current.model_copy(update={**fields, "updated_at": time.time()})
            data = merged.model_dump()
            data["modes"] = json.dumps(data["modes"], ensure_ascii=False)
            cols = ", ".join(data)
            marks = ", ".join("?" * len(data))
            conn.execute(f"INSERT OR REPLACE INTO llm_capabilities ({cols}) VALUES ({marks})", tuple(data.values()))
        return merged

    def all(self) -> list[Capabilities]:
        with self.db.read() as conn:
            return [_row(r) for r in conn.execute("SELECT * FROM llm_capabilities ORDER BY endpoint, model")]

    def forget(self, endpoint: str, model: str) -> None:
        """Drop what was learned, so the next call negotiates again (e.g. after the server was upgraded)."""
        with self.db.write() as conn:
            conn.execute("DELETE FROM llm_capabilities WHERE endpoint = ? AND model = ?", (endpoint, model))
