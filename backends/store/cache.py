"""Persistent response cache: identical requests to the same endpoint and model cost nothing the second time.

The key is a SHA-256 of endpoint, model, messages, sampling parameters, schema and an optional
salt (callers that want k independent samples pass the sample index as salt).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from backends.llm.types import ChatRequest, ChatResult
from backends.store.db import Database

_SCHEMA = """CREATE TABLE IF NOT EXISTS response_cache (
    key TEXT PRIMARY KEY, endpoint TEXT, model TEXT, result TEXT NOT NULL, created_at REAL, hits INTEGER DEFAULT 0)"""


def cache_key(endpoint: str, req: ChatRequest, salt: str = "") -> str:
    payload: dict[str, Any] = {
        "endpoint": endpoint,
        "model": req.model,
        "messages": [m.model_dump() for m in req.messages],
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "seed": req.seed,
        "response_format": req.response_format,
        "stop": req.stop,
        "extra": req.extra,
        "salt": salt,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ResponseCache:
    """Cached chat results in their own SQLite file (``cache.sqlite``), so clearing it never touches records."""

    def __init__(self, db: Database):
        self.db = db
        with db.write() as conn:
            conn.execute(_SCHEMA)

    def get(self, key: str) -> ChatResult | None:
        with self.db.write() as conn:
            row = conn.execute("SELECT result FROM response_cache WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE response_cache SET hits = hits + 1 WHERE key = ?", (key,))
        return ChatResult.model_validate_json(row[0]).model_copy(update={"cache_hit": True, "latency_ms": 0.0})

    def put(self, key: str, endpoint: str, result: ChatResult) -> None:
        with self.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO response_cache (key, endpoint, model, result, created_at) "
                         "VALUES (?, ?, ?, ?, ?)", (key, endpoint, result.model, result.model_dump_json(), time.time()))

    def delete(self, key: str) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM response_cache WHERE key = ?", (key,))

    def size(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM response_cache").fetchone()[0])
