"""The run store: LLM calls now; memory builds, simulation runs, judgments and annotations as they arrive."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from backends.store.capabilities import CapabilityStore
from backends.store.db import Database


class CallRecord(BaseModel):
    """One LLM call as accounted: what was asked of whom, what it cost, whether it failed. No keys, no texts."""

    model_config = ConfigDict(extra="forbid")
    session_id: str | None = None
    run_id: str | None = None
    role: str
    provider: str
    endpoint: str
    model: str
    prompt_name: str | None = None
    prompt_version: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int | None = None  # of tokens_in, served from the endpoint's prompt cache (None: it did not say)
    tokens_processed: int | None = None  # of tokens_in, computed by the endpoint (tokens_in − tokens_cached)
    latency_ms: float = 0.0
    cache_hit: bool = False
    attempts: int = 1
    structured_ok: bool | None = None
    error: str | None = None
    reasoning_tokens: int = 0
    tokens_counter: str | None = None  # who counted tokens_in/out: "endpoint" (its usage) or a counter's name
    reasoning_counter: str | None = None
    prompt_tokens_est: int | None = None  # the prompt as counted before sending (window fitting)
    est_counter: str | None = None
    max_tokens: int | None = None  # as sent (fitting may lower it)
    context_window: int | None = None
    structured_mode: str | None = None
    fit_note: str | None = None


class Totals(BaseModel):
    calls: int = 0
    errors: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0  # prompt tokens the endpoints served from their prompt cache (where they said)
    tokens_reported: int = 0  # prompt tokens of the calls whose endpoint said what its cache served
    by_model: dict[str, tuple[int, int]] = {}

    @property
    def cached_share(self) -> float | None:
        """Share of prompt tokens served from the endpoints' caches, over the calls that said; None if none did."""
        return self.tokens_cached / self.tokens_reported if self.tokens_reported else None


class RunStore:
    """The LLM-call accounting of the run store (``runs.sqlite``); safe to share between threads and processes."""

    def __init__(self, db: Database, capabilities: CapabilityStore):
        self.db = db
        self.capabilities = capabilities  # what each endpoint + model was found to support (same file)

    def record_call(self, rec: CallRecord, reasoning: str = "") -> int:
        """Insert one call; a reasoning model's thinking goes to ``llm_reasoning`` beside it (never into texts
        that are parsed or sent again)."""
        data = rec.model_dump()
        cols = ", ".join(["ts", *data])
        marks = ", ".join("?" * (len(data) + 1))
        with self.db.write() as conn:
            cur = conn.execute(f"INSERT INTO llm_calls ({cols}) VALUES ({marks})", (time.time(), *data.values()))
            call_id = int(cur.lastrowid or 0)
            if reasoning:
                conn.execute("INSERT INTO llm_reasoning (call_id, text) VALUES (?, ?)", (call_id, reasoning))
            return call_id

    @staticmethod
    def detach_calls_in(conn: sqlite3.Connection, record_ids: list[str], tag: str) -> int:
        """Inside the caller's write transaction, file the calls made for ``record_ids`` (a discarded run, the
        judgments that read it) under ``tag:<id>`` instead: what they cost stays in the session's and the lab's
        totals, but a record made again under the same id does not count them as its own. How many."""
        return sum(conn.execute("UPDATE llm_calls SET run_id=? WHERE run_id=?", (f"{tag}:{rid}", rid)).rowcount
                   for rid in record_ids)

    def reasoning(self, run_id: str | None = None, session_id: str | None = None, limit: int = 100) -> list[dict]:
        """The thinking recorded with calls of one run or browser session, newest first."""
        conds, args = [], []
        for col, value in (("c.run_id", run_id), ("c.session_id", session_id)):
            if value:
                conds.append(f"{col} = ?")
                args.append(value)
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        sql = ("SELECT c.id, c.ts, c.role, c.model, c.prompt_name, c.reasoning_tokens, c.reasoning_counter, r.text "
               f"FROM llm_reasoning r JOIN llm_calls c ON c.id = r.call_id{where} ORDER BY c.id DESC LIMIT ?")
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute(sql, (*args, limit))]

    def calls(self, session_id: str | None = None, limit: int = 500) -> list[dict]:
        sql = "SELECT * FROM llm_calls" + (" WHERE session_id = ?" if session_id else "") + " ORDER BY id DESC LIMIT ?"
        args = (session_id, limit) if session_id else (limit,)
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute(sql, args)]

    def calls_of(self, run_id: str) -> list[dict]:
        """Every call recorded under one run, in the order they were accounted (a trace's leaves)."""
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute("SELECT * FROM llm_calls WHERE run_id = ? ORDER BY ts, id", (run_id,))]

    def run_summaries(self, limit: int = 2000) -> list[dict]:
        """One row per run that made calls, newest first: its roles and models (comma-joined), calls, failed calls,
        calls retried, prompt / cached / output tokens, LLM seconds, first and last call (the traces' index)."""
        sql = ("SELECT run_id, GROUP_CONCAT(DISTINCT role) AS roles, GROUP_CONCAT(DISTINCT model) AS models, "
               "COUNT(*) AS calls, SUM(error IS NOT NULL) AS errors, SUM(attempts > 1) AS retried, "
               "SUM(tokens_in) AS tokens_in, SUM(tokens_cached) AS tokens_cached, SUM(tokens_out) AS tokens_out, "
               "SUM(latency_ms) / 1000.0 AS llm_s, MIN(ts - latency_ms / 1000.0) AS started, MAX(ts) AS ended "
               "FROM llm_calls WHERE run_id IS NOT NULL GROUP BY run_id ORDER BY ended DESC LIMIT ?")
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute(sql, (limit,))]

    def by_prompt(self, run_id: str) -> dict[str, tuple[int, int, int, float]]:
        """Prompt name → (calls, tokens in, tokens out, LLM seconds) of one run."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT prompt_name, COUNT(*), SUM(tokens_in), SUM(tokens_out), SUM(latency_ms) "
                                "FROM llm_calls WHERE run_id=? GROUP BY prompt_name", (run_id,)).fetchall()
        return {r[0]: (r[1], r[2] or 0, r[3] or 0, (r[4] or 0) / 1000) for r in rows}

    def prompt_means(self) -> dict[str, tuple[int, float, float, float]]:
        """Prompt name → (answered calls, mean tokens in, mean tokens out, mean seconds) over every call that
        reached its endpoint (no cache hits, no errors): what a plan calibrates its estimates on."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT prompt_name, COUNT(*), AVG(tokens_in), AVG(tokens_out), AVG(latency_ms) "
                                "FROM llm_calls WHERE cache_hit=0 AND error IS NULL AND prompt_name IS NOT NULL "
                                "GROUP BY prompt_name").fetchall()
        return {r[0]: (r[1], r[2] or 0.0, r[3] or 0.0, (r[4] or 0.0) / 1000) for r in rows}

    def totals(self, session_id: str | None = None, run_id: str | None = None) -> Totals:
        """Sums over one browser session, one run (e.g. a memory build), or everything."""
        conds, args = [], []
        if session_id:
            conds.append("session_id = ?")
            args.append(session_id)
        if run_id:
            conds.append("run_id = ?")
            args.append(run_id)
        where = (" WHERE " + " AND ".join(conds)) if conds else ""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT model, COUNT(*), SUM(error IS NOT NULL), SUM(cache_hit), SUM(tokens_in), SUM(tokens_out), "
                "SUM(tokens_cached), SUM(CASE WHEN tokens_cached IS NOT NULL THEN tokens_in ELSE 0 END) "
                f"FROM llm_calls{where} GROUP BY model", args).fetchall()
        t = Totals()
        for model, n, errors, hits, tin, tout, cached, reported in rows:
            t.calls += n
            t.errors += errors or 0
            t.cache_hits += hits or 0
            t.tokens_in += tin or 0
            t.tokens_out += tout or 0
            t.tokens_cached += cached or 0
            t.tokens_reported += reported or 0
            t.by_model[model] = (tin or 0, tout or 0)
        return t

    def models_by_run(self, run_ids: Iterable[str]) -> dict[str, list[tuple[str, str, str, int]]]:
        """(role, provider, model, calls) of each run's LLM calls — which models made a build or a run."""
        ids = list(run_ids)
        out: dict[str, list[tuple[str, str, str, int]]] = {i: [] for i in ids}
        if not ids:
            return out
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT run_id, role, provider, model, COUNT(*) FROM llm_calls WHERE run_id IN "
                                f"({', '.join('?' * len(ids))}) GROUP BY run_id, role, provider, model "
                                "ORDER BY run_id, role", ids).fetchall()
        for run_id, role, provider, model, n in rows:
            out[run_id].append((role, provider, model, n))
        return out

    def models_used(self) -> list[tuple[str, str, str, str, int]]:
        """(role, provider, endpoint, model, calls) over every recorded LLM call, most calls first — what the records
        themselves say made them (a presentation's banner checks a bundle's claims against it)."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT role, provider, endpoint, model, COUNT(*) AS n FROM llm_calls "
                                "GROUP BY role, provider, endpoint, model ORDER BY n DESC, role, model").fetchall()
        return [(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4])) for r in rows]
