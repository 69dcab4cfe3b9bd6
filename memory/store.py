"""Persistence of memory builds: versioned items in SQLite, so the memory as of any session can be shown.

A build advances in *stages*, two per session: stage ``2k`` ingests session k's logs (known before
its dialogue starts), stage ``2k+1`` its dialogue. Retrieval for session k's dialogue reads the
memory as of stage ``2k``, so it sees that session's situations but nothing of its own dialogue.
Each item version is valid for stages ``valid_from ≤ s < valid_to``; committing a stage closes the
versions it changes or deletes and opens new ones, in one transaction with the record that the
stage is done, so an interrupted build resumes after the last finished stage.
A person's "forget" is stored separately and hides the item (and what derives from it) everywhere.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable

from pydantic import BaseModel

from backends.store.db import Database
from memory.types import Changes, MemoryItem
from memory.views import REVISION_SQL, Revision, View, ViewCache


class BuildInfo(BaseModel):
    build_id: str
    dataset: str
    user_id: str
    method: str
    config: dict
    stages_done: int
    sessions_done: list[str]  # sessions with at least their logs ingested
    llm_calls: int
    tokens_in: int
    tokens_out: int
    seconds: float


class SessionDiff(BaseModel):
    added: list[MemoryItem]
    changed: list[tuple[MemoryItem, MemoryItem]]  # (before, after)
    removed: list[MemoryItem]


def logs_stage(session_position: int) -> int:
    """Stage after the logs of the session at this position (0-based, in time order)."""
    return 2 * session_position


def dialogue_stage(session_position: int) -> int:
    """Stage after the whole session: the snapshot "memory as of session k"."""
    return 2 * session_position + 1


def rows_order(rows: list) -> Callable[[str], int]:
    """Sort key: a sample id's position in ``rows`` (ordered by stage)."""
    order = {r[0]: n for n, r in enumerate(rows)}
    return lambda sample_id: order[sample_id]


def build_id_for(dataset: str, user_id: str, method: str, config: dict) -> str:
    raw = json.dumps({"d": dataset, "u": user_id, "m": method, "c": config}, sort_keys=True)
    return f"{method}-{user_id}-{hashlib.sha1(raw.encode()).hexdigest()[:10]}"


class MemoryStore:
    def __init__(self, db: Database):
        self.db = db
        self._views = ViewCache()

    # ------------------------------------------------------------------ builds

    def open_build(self, dataset: str, user_id: str, method: str, config: dict) -> str:
        """The build's id, creating the build when it is new (a stored build is opened without a write, so a
        read-only workspace opens what it holds)."""
        build_id = build_id_for(dataset, user_id, method, config)
        with self.db.read() as conn:
            if conn.execute("SELECT 1 FROM memory_builds WHERE build_id=?", (build_id,)).fetchone() is not None:
                return build_id
        now = time.time()
        with self.db.write() as conn:
            conn.execute("INSERT OR IGNORE INTO memory_builds VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (build_id, dataset, user_id, method, json.dumps(config, sort_keys=True), now, now))
        return build_id

    def find_build(self, dataset: str, user_id: str, method: str) -> str | None:
        """The most recently updated build of this method for this user."""
        with self.db.read() as conn:
            row = conn.execute("SELECT build_id FROM memory_builds WHERE dataset=? AND user_id=? AND method=? "
                               "ORDER BY updated_at DESC LIMIT 1", (dataset, user_id, method)).fetchone()
        return row[0] if row else None

    def build_rows(self, build_ids: list[str]) -> list[dict]:
        """The ``memory_builds`` rows of these builds (dataset, user, method, config)."""
        ids = sorted(set(build_ids))
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute(
                f"SELECT * FROM memory_builds WHERE build_id IN ({','.join('?' * len(ids))})", ids)]
    def builds_of(self, dataset: str, user_id: str, method: str) -> list[BuildInfo]:
        """Every stored build of this method for this user, newest first (e.g. made with other settings or
        imported from a bundle made elsewhere)."""
        with self.db.read() as conn:
            ids = [r[0] for r in conn.execute("SELECT build_id FROM memory_builds WHERE dataset=? AND user_id=? AND "
                                              "method=? ORDER BY updated_at DESC", (dataset, user_id, method))]
        return [self.info(i) for i in ids]

    def builds(self, dataset: str) -> list[tuple[str, str]]:
        """(build id, user id) of every build of this dataset, newest first."""
        with self.db.read() as conn:
            return [(r[0], r[1]) for r in conn.execute(
                "SELECT build_id, user_id FROM memory_builds WHERE dataset=? ORDER BY updated_at DESC", (dataset,))]

    def info(self, build_id: str) -> BuildInfo:
        with self.db.read() as conn:
            b = conn.execute("SELECT * FROM memory_builds WHERE build_id=?", (build_id,)).fetchone()
            if b is None:
                raise KeyError(f"no memory build {build_id!r}")
            rows = conn.execute("SELECT sample_id, llm_calls, tokens_in, tokens_out, seconds FROM memory_build_stages "
                                "WHERE build_id=? ORDER BY stage", (build_id,)).fetchall()
        return BuildInfo(build_id=build_id, dataset=b["dataset"], user_id=b["user_id"], method=b["method"],
                         config=json.loads(b["config"]), stages_done=len(rows),
                         sessions_done=sorted({r[0] for r in rows}, key=rows_order(rows)),
                         llm_calls=sum(r[1] for r in rows), tokens_in=sum(r[2] for r in rows),
                         tokens_out=sum(r[3] for r in rows), seconds=sum(r[4] for r in rows))

    def stage_costs(self) -> list[tuple[str, str, int, int, int, int, float]]:
        """(method, user, stage, llm calls, tokens in, tokens out, seconds) of every stage of every build."""
        with self.db.read() as conn:
            return [tuple(r) for r in conn.execute(
                "SELECT b.method, b.user_id, s.stage, s.llm_calls, s.tokens_in, s.tokens_out, s.seconds "
                "FROM memory_build_stages s JOIN memory_builds b USING (build_id) ORDER BY b.method, s.stage")]

    def session_costs(self, build_id: str) -> list[dict]:
        with self.db.read() as conn:
            return [dict(r) for r in conn.execute("SELECT * FROM memory_build_stages WHERE build_id=? "
                                                  "ORDER BY stage", (build_id,))]

    def delete_build(self, build_id: str) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM memory_builds WHERE build_id=?", (build_id,))

    # ------------------------------------------------------------------ sessions

    def commit_stage(self, build_id: str, index: int, sample_id: str, changes: Changes, *, llm_calls: int = 0,
                     tokens_in: int = 0, tokens_out: int = 0, seconds: float = 0.0) -> None:
        """Apply one stage's changes and mark it done, atomically (the parsed views follow: :mod:`memory.views`)."""
        closed: set[str] = set()
        added: list[str] = []
        with self.db.write() as conn:
            before = self._revision(conn, build_id)
            latest = conn.execute("SELECT MAX(stage) FROM memory_build_stages WHERE build_id=?", (build_id,)).fetchone()[0]
            current = {r["item_id"]: r for r in conn.execute(
                "SELECT item_id, version, data FROM memory_items WHERE build_id=? AND valid_to IS NULL", (build_id,))}
            for item_id in changes.deletes:
                if item_id in current:
                    conn.execute("UPDATE memory_items SET valid_to=? WHERE build_id=? AND item_id=? AND valid_to IS NULL",
                                 (index, build_id, item_id))
                    closed.add(item_id)
            for item in changes.upserts:
                row = current.get(item.id)
                if row is not None:
                    if MemoryItem.model_validate_json(row["data"]).same_content(item) and item.id not in changes.deletes:
                        continue
                    conn.execute("UPDATE memory_items SET valid_to=? WHERE build_id=? AND item_id=? AND valid_to IS NULL",
                                 (index, build_id, item.id))
                    closed.add(item.id)
                version = (row["version"] + 1) if row is not None else 1
                if row is None:
                    prev = conn.execute("SELECT MAX(version) FROM memory_items WHERE build_id=? AND item_id=?",
                                        (build_id, item.id)).fetchone()[0]
                    version = (prev or 0) + 1
                added.append(item.model_dump_json())
                conn.execute("INSERT INTO memory_items VALUES (?, ?, ?, ?, ?, NULL, ?)",
                             (build_id, item.id, version, item.layer, index, added[-1]))
            conn.execute("INSERT OR REPLACE INTO memory_build_stages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (build_id, index, sample_id, time.time(), llm_calls, tokens_in, tokens_out, seconds,
                          json.dumps(changes.notes, ensure_ascii=False)))
            conn.execute("UPDATE memory_builds SET updated_at=? WHERE build_id=?", (time.time(), build_id))
            after = self._revision(conn, build_id)
        self._views.committed(build_id, index, before, after, -1 if latest is None else latest, closed,
                              [MemoryItem.model_validate_json(data) for data in added])  # as a read would parse them

    def done_stages(self, build_id: str) -> list[int]:
        with self.db.read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT stage FROM memory_build_stages WHERE build_id=? ORDER BY stage", (build_id,))]

    def notes(self, build_id: str) -> dict[int, list[str]]:
        with self.db.read() as conn:
            return {r[0]: json.loads(r[1]) for r in conn.execute(
                "SELECT stage, notes FROM memory_build_stages WHERE build_id=?", (build_id,))}

    # ------------------------------------------------------------------ reading

    def forgotten(self, build_id: str) -> set[str]:
        with self.db.read() as conn:
            return {r[0] for r in conn.execute("SELECT item_id FROM memory_forgotten WHERE build_id=?", (build_id,))}

    def items_as_of(self, build_id: str, index: int, include_forgotten: bool = False) -> list[MemoryItem]:
        """The memory right after stage ``index``."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT data FROM memory_items WHERE build_id=? AND valid_from<=? AND (valid_to IS NULL OR valid_to>?) "
                "ORDER BY valid_from, item_id", (build_id, index, index)).fetchall()
        items = [MemoryItem.model_validate_json(r[0]) for r in rows]
        if include_forgotten:
            return items
        hidden = self.forgotten(build_id)
        return [i for i in items if i.id not in hidden]

    @staticmethod
    def _revision(conn, build_id: str) -> Revision:
        return tuple(conn.execute(REVISION_SQL, {"b": build_id}).fetchone())

    def revision(self, build_id: str) -> Revision:
        """What the build's stored memory is as of now (:data:`memory.views.REVISION_SQL`): equal revisions, equal
        views."""
        with self.db.read() as conn:
            return self._revision(conn, build_id)

    def view_as_of(self, build_id: str, index: int) -> tuple[list[MemoryItem], frozenset[str]]:
        """(the memory right after stage ``index`` without forgotten items, the forgotten ids), parsed once per
        revision of the build (:mod:`memory.views`). The items are shared: never change one in place."""
        key = (build_id, index)
        with self.db.read() as conn:  # one snapshot: what is kept is what the revision names
            revision = self._revision(conn, build_id)
            if (view := self._views.get(key, revision)) is None:
                rows = conn.execute(
                    "SELECT valid_from, data FROM memory_items WHERE build_id=? AND valid_from<=? AND "
                    "(valid_to IS NULL OR valid_to>?) ORDER BY valid_from, item_id", (build_id, index, index)).fetchall()
                view = View(tuple((r[0], MemoryItem.model_validate_json(r[1])) for r in rows),
                            frozenset(self.forgotten(build_id)))
                self._views.put(key, revision, view)
        return view.items, view.hidden

    def diff(self, build_id: str, index: int, since: int | None = None) -> SessionDiff:
        """What changed between stage ``since`` (default ``index - 1``) and stage ``index``."""
        since = index - 1 if since is None else since
        before = {i.id: i for i in self.items_as_of(build_id, since)} if since >= 0 else {}
        after = {i.id: i for i in self.items_as_of(build_id, index)}
        return SessionDiff(
            added=[after[k] for k in after if k not in before],
            changed=[(before[k], after[k]) for k in after if k in before and not before[k].same_content(after[k])],
            removed=[before[k] for k in before if k not in after],
        )

    def opened_at(self, build_id: str) -> dict[str, int]:
        """Item id → the stage its current version opened at, for every item still open."""
        with self.db.read() as conn:
            return {r[0]: r[1] for r in conn.execute(
                "SELECT item_id, valid_from FROM memory_items WHERE build_id=? AND valid_to IS NULL", (build_id,))}

    def all_versions(self, build_id: str) -> list[MemoryItem]:
        """Every version of every item of the build (forgotten ones included)."""
        with self.db.read() as conn:
            return [MemoryItem.model_validate_json(r[0]) for r in conn.execute(
                "SELECT data FROM memory_items WHERE build_id=?", (build_id,))]

    def versions(self, build_id: str) -> list[tuple[MemoryItem, int, int | None]]:
        """Every stored version of every item: (item, valid_from, valid_to or None while current)."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT data, valid_from, valid_to FROM memory_items WHERE build_id=? "
                                "ORDER BY valid_from, item_id", (build_id,)).fetchall()
        return [(MemoryItem.model_validate_json(r[0]), r[1], r[2]) for r in rows]

    # ------------------------------------------------------------------ a person's edits

    def forget(self, build_id: str, item_ids: set[str], reason: str) -> None:
        with self.db.write() as conn:
            for item_id in item_ids:
                conn.execute("INSERT OR REPLACE INTO memory_forgotten VALUES (?, ?, ?, ?)",
                             (build_id, item_id, time.time(), reason))

    def edit(self, build_id: str, item_id: str, text: str, editor: str = "person") -> MemoryItem:
        """Change an item's text in its current version (marked as edited by a person); the previous text is
        kept as an edit version (:meth:`edit_history`), never lost."""
        with self.db.write() as conn:
            row = conn.execute("SELECT version, data FROM memory_items WHERE build_id=? AND item_id=? "
                               "ORDER BY version DESC LIMIT 1", (build_id, item_id)).fetchone()
            if row is None:
                raise KeyError(f"no memory item {item_id!r}")
            before = MemoryItem.model_validate_json(row["data"])
            item = before.model_copy(update={"text": text, "meta": {**before.meta, "edited_by_person": True}})
            conn.execute("UPDATE memory_items SET data=? WHERE build_id=? AND item_id=? AND version=?",
                         (item.model_dump_json(), build_id, item_id, row["version"]))
            conn.execute("INSERT INTO memory_item_edits (build_id, item_id, version, edited_at, editor, previous_text, "
                         "new_text) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (build_id, item_id, row["version"], time.time(), editor, before.text, text))
        return item

    def edit_history(self, build_id: str, item_id: str) -> list[dict]:
        """Every edit of the item by a person, oldest first: who, when, the text before and after."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT version, edited_at, editor, previous_text, new_text FROM memory_item_edits "
                                "WHERE build_id=? AND item_id=? ORDER BY id", (build_id, item_id)).fetchall()
        return [dict(r) for r in rows]


def derived_closure(items: list[MemoryItem], roots: set[str]) -> set[str]:
    """Ids of ``roots`` and of every item whose provenance reaches them (directly or through other items)."""
    out = set(roots)
    changed = True
    while changed:
        changed = False
        for item in items:
            if item.id in out:
                continue
            if any(p.startswith("item:") and p[5:] in out for p in item.provenance):
                out.add(item.id)
                changed = True
    return out
