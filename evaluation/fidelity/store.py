"""Fidelity reports in the run store (table ``memory_fidelity``, migration 20), keyed by what was measured,
so a page reopens a result instantly and other features (exports, leaderboards) can read them.

A report is parsed from its stored JSON once per process (:class:`ParsedReports`): pydantic parsing of a
demo workspace's ninety-odd reports (some 7 MB of JSON) costs a page's first view a second and more on a busy
machine, and every later read of an unchanged row returns the same parsed report. The memo is keyed by the row's
JSON itself (its digest), so a row stored again with anything changed — a new measurement under the same key,
a judge variant added, an import — is parsed anew: a read never returns what the store no longer holds. Parsed
reports are shared, so callers treat them as read-only (:func:`evaluation.fidelity.service.judge_report` stores
a copy)."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import NamedTuple

from backends.store.db import Database
from evaluation.fidelity.types import FidelityReport

# stored JSON kept parsed per process, least recently read dropped first: parsed reports take some 5 bytes of memory
# per character of JSON (the demo's 91 reports: 7 MB of JSON, 39 MB parsed), so this keeps ~90 MB at most
MEMO_CHARS = 16 * 1024 * 1024


class StoredReports(NamedTuple):
    """Reports as read, with the revision of the rows they came from: a digest of each row's key and stored JSON
    (any change of any row changes it), what pure figures computed from them are memoised by."""

    reports: list[FidelityReport]
    revision: str


class ParsedReports:
    """Reports parsed from stored JSON, kept by the JSON's digest within a budget of JSON characters."""

    def __init__(self, budget_chars: int = MEMO_CHARS) -> None:
        self.budget = budget_chars
        self._memo: OrderedDict[str, tuple[int, FidelityReport]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def parse(self, text: str) -> tuple[str, FidelityReport]:
        """(digest of ``text``, the report it holds), parsed only when this text was not parsed before."""
        digest = hashlib.sha1(text.encode()).hexdigest()
        with self._lock:
            hit = self._memo.get(digest)
            if hit is not None:
                self._memo.move_to_end(digest)
                return digest, hit[1]
        report = FidelityReport.model_validate_json(text)
        with self._lock:
            if digest not in self._memo:
                self._memo[digest] = (len(text), report)
                self._chars += len(text)
            while self._chars > self.budget and len(self._memo) > 1:
                _, (size, _) = self._memo.popitem(last=False)
                self._chars -= size
        return digest, report

    def __len__(self) -> int:
        return len(self._memo)

    def clear(self) -> None:
        with self._lock:
            self._memo.clear()
            self._chars = 0


PARSED = ParsedReports()  # one per process: every store (home, presentation) reads through it


def revision_of(rows: list[tuple[str, str]]) -> str:
    """The revision of (fidelity key, JSON digest) rows, in any order."""
    h = hashlib.sha1()
    for key, digest in sorted(rows):
        h.update(f"{key}\0{digest}\n".encode())
    return h.hexdigest()


class FidelityStore:
    def __init__(self, db: Database):
        self.db = db

    def save(self, report: FidelityReport) -> None:
        """Insert or replace the report under its ``fidelity_key`` (the same measurement gives the same figures)."""
        if not report.fidelity_key:
            raise ValueError(f"fidelity report of {report.method} for user {report.user_id} has no fidelity_key")
        with self.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO memory_fidelity VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (report.fidelity_key, report.dataset, report.user_id, report.method, report.build_id,
                          report.embedder, report.threshold, report.model_dump_json(), report.created_at))

    def get(self, fidelity_key: str) -> FidelityReport | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT data FROM memory_fidelity WHERE fidelity_key=?", (fidelity_key,)).fetchone()
        return PARSED.parse(row[0])[1] if row else None

    def reports(self, dataset: str, user_id: str | None = None, method: str | None = None) -> list[FidelityReport]:
        """Stored reports of a dataset, oldest first, optionally of one user and/or method."""
        sql = "SELECT data FROM memory_fidelity WHERE dataset=?"
        args: list[object] = [dataset]
        for column, value in (("user_id", user_id), ("method", method)):
            if value is not None:
                sql += f" AND {column}=?"
                args.append(value)
        with self.db.read() as conn:
            rows = conn.execute(sql + " ORDER BY created_at", args).fetchall()
        return [PARSED.parse(r[0])[1] for r in rows]

    def any_report(self, dataset: str) -> bool:
        """Whether a report of this dataset is stored (without reading any)."""
        with self.db.read() as conn:
            return conn.execute("SELECT 1 FROM memory_fidelity WHERE dataset=? LIMIT 1", (dataset,)).fetchone() is not None

    def latest(self, dataset: str) -> list[FidelityReport]:
        """The newest report per (user, method, embedder, threshold) of a dataset: what a leaderboard shows."""
        return self.latest_with_revision(dataset).reports

    def latest_with_revision(self, dataset: str) -> StoredReports:
        """:meth:`latest` with the revision of the rows read. The newest row of each (user, method, embedder,
        threshold) is chosen from the table's columns, so a superseded report is never parsed."""
        with self.db.read() as conn:
            heads = conn.execute("SELECT fidelity_key, user_id, method, embedder, threshold FROM memory_fidelity "
                                 "WHERE dataset=? ORDER BY created_at", (dataset,)).fetchall()
            newest = {(u, m, e, t): key for key, u, m, e, t in heads}
            wanted = sorted(newest.values())
            rows: list[tuple[str, str]] = []
            for at in range(0, len(wanted), 500):  # SQLite's bound-parameter limit
                part = wanted[at:at + 500]
                rows += conn.execute(f"SELECT fidelity_key, data FROM memory_fidelity WHERE fidelity_key IN "
                                     f"({', '.join('?' * len(part))})", part).fetchall()
        parsed = [(key, *PARSED.parse(text)) for key, text in rows]
        reports = sorted((r for _, _, r in parsed), key=lambda r: (r.method, r.user_id, r.created_at))
        return StoredReports(reports, revision_of([(key, digest) for key, digest, _ in parsed]))
