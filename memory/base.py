"""The interface every memory method implements, and what it gets to work with.

A method ingests a user's sessions in time order, one at a time and in two steps —
``ingest_logs`` (what the device logs since the last dialogue tell) then ``ingest_dialogue`` —
each returning only that step's :class:`~memory.types.Changes`; it answers
``retrieve(query, purpose)`` with a :class:`~memory.types.RetrievalTrace`. The runner
(:mod:`memory.build`) persists changes as snapshots (see :mod:`memory.store`) and maintains the
vector index, so methods stay small.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from backends.embeddings import Embedder
from backends.llm.client import LLMClient
from memory.index import VectorIndex
from memory.privacy import ForgetRequest, find_forget_requests, mentions, redact_text
from memory.tokens import count_tokens, counter_name
from memory.types import (
    BlockPart,
    Changes,
    MemoryItem,
    PromptBlock,
    Purpose,
    RetrievalTrace,
    RetrievedItem,
    render_context,
)
from palset.dataset import Session, User


@dataclass
class MethodContext:
    """Everything a method may use; LLM calls go through ``llm`` as role ``memory_builder``."""

    dataset: str
    user: User
    build_id: str
    llm: LLMClient | None
    embedder: Embedder
    index: VectorIndex
    config: dict[str, Any] = field(default_factory=dict)
    files: Path | None = None  # a folder for this build's files (PLUM's adapters); None: the method may keep none
    cancel: threading.Event | None = None  # set by the builder while it runs: stops starting calls inside a stage

    @property
    def language(self) -> str:
        return self.user.language

    def require_files(self) -> Path:
        """This build's file folder; a method that keeps files fails clearly when the builder was given none."""
        if self.files is None:
            raise ValueError(f"memory method of build {self.build_id} keeps files, but its builder has no files_root")
        return self.files


@dataclass
class MemoryView:
    """The memory right after stage ``stage`` (``-1``: empty); see :mod:`memory.store` for stages."""

    stage: int
    items: dict[str, MemoryItem]
    forgotten: set[str] = field(default_factory=set)

    def layer(self, name: str) -> list[MemoryItem]:
        return [i for i in self.items.values() if i.layer == name]


# ---------------------------------------------------------------- session text (always redacted)


def log_ref(session: Session, j: int) -> str:
    return f"log:{session.sample_id}:{j}"


def turn_ref(session: Session, t: int) -> str:
    return f"turn:{session.sample_id}:{t}"


def render_log(session: Session, j: int) -> str:
    lg = session.logs[j]
    return f"- [{lg.timestamp:%Y-%m-%d %H:%M}] {redact_text(lg.content)}"


def render_logs(session: Session) -> str:
    return "\n".join(render_log(session, j) for j in range(len(session.logs)))


def forget_requests(session: Session) -> list[ForgetRequest]:
    return find_forget_requests(session.sample_id, [(t, turn.user.content) for t, turn in enumerate(session.turns, 1)])


def dialogue_turns(session: Session, with_acts: bool = False) -> list[tuple[int, str]]:
    """(turn number, "user: …\\nassistant: …") with PII redacted and forget-request turns left out."""
    forget_turns = {r.turn for r in forget_requests(session)}
    out = []
    for t, turn in enumerate(session.turns, 1):
        if t in forget_turns:
            continue
        u = redact_text(turn.user.content)
        a = redact_text(turn.assistant.content)
        if with_acts:
            out.append((t, f"user ({turn.user.action.value}): {u}\nassistant ({turn.assistant.action.value}): {a}"))
        else:
            out.append((t, f"user: {u}\nassistant: {a}"))
    return out


def render_dialogue(session: Session, with_acts: bool = False) -> str:
    return "\n".join(text for _, text in dialogue_turns(session, with_acts))


def render_session(session: Session) -> str:
    """Logs then dialogue of one session, as a full-history method sees it."""
    return (f"## Session {session.sample_id} ({session.dialogue_timestamp:%Y-%m-%d %H:%M})\n"
            f"### Logs\n{render_logs(session)}\n### Dialogue\n{render_dialogue(session)}")


def full_history_tokens(user: User, current: Session | None) -> int:
    """Tokens of everything before the current session plus the current session's logs (the long-context baseline).

    Cached per (user object, session): sessions never change once loaded, and tokenising the whole
    history on every assistant turn was most of a retrieval's time."""
    cache = user.derived_cache.setdefault("full_history_tokens", {})
    key = current.index if current is not None else -1
    if key not in cache:
        cache[key] = _count_full_history(user, current)
    return cache[key]


def _count_full_history(user: User, current: Session | None) -> int:
    total = 0
    for s in user.sessions:
        if current is not None and s.index >= current.index:
            break
        total += count_tokens(render_session(s))
    if current is not None:
        total += count_tokens(render_logs(current))
    return total


def scored_part(r: RetrievedItem, text: str) -> BlockPart:
    """A retrieved item as a block part a window fit may leave out (lowest score first; unscored ones last)."""
    return BlockPart(text=text, label=r.item.id, refs=[r.item.id], score=r.score, order=r.item.session_index)


T = TypeVar("T")
R = TypeVar("R")

# ---------------------------------------------------------------- the interface


class MemoryMethod(ABC):
    """Subclasses set ``name``, ``label``, ``layers`` and implement ``ingest`` and ``retrieve``."""

    name: ClassVar[str]
    label: ClassVar[str]
    layers: ClassVar[tuple[str, ...]] = ()
    uses_llm: ClassVar[bool] = False
    uses_query: ClassVar[bool] = True
    description: ClassVar[str] = ""
    oracle: ClassVar[bool] = False  # built from the dataset's annotations (an upper bound, never a contender)
    groups_logs_in: ClassVar[str | None] = None  # the layer whose items group the logs (situation recovery)
    indexed_layers: ClassVar[tuple[str, ...] | None] = None  # layers retrieval searches (None: every layer)
    index_on_build: ClassVar[bool] = True  # False: embed on first retrieval (a build that is instant without it)

    def __init__(self, ctx: MethodContext):
        self.ctx = ctx

    def ingest_logs(self, session: Session, memory: MemoryView) -> Changes:
        """What this session's logs add (``memory`` holds everything before them)."""
        return Changes()

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        """What this session's dialogue adds (``memory`` includes this session's logs)."""
        return Changes()

    def finish_history(self, memory: MemoryView) -> Changes:
        """Called once between the last history session and the first query session (e.g. clustering)."""
        return Changes()

    @abstractmethod
    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        """Prompt context for ``query``; ``memory`` is as of ``current``'s logs (or the latest stage)."""

    def assistant_provider(self, current: Session | None = None) -> Any:
        """A provider that answers the ``assistant`` role for this memory (a ChatProvider), or None.

        None (the default): the assistant is the configured LLM, with retrieved text in its prompt.
        A method whose memory lives in model weights (PLUM) returns its own model here; ``current``
        is the session being answered, so the memory is as of before it. See :func:`assistant_client`."""
        return None

    # helpers shared by methods -----------------------------------------------------------

    def each(self, fn: Callable[[T, list[str]], R], items: Sequence[T], notes: list[str],
             held: int = 0) -> list[R]:
        """``fn(item, notes)`` for every item, as many in flight together as the builder's endpoint allows
        (:meth:`backends.llm.client.LLMClient.fan_out`) less the ``held`` slots other work of the method keeps busy
        meanwhile (at least one); results, and the notes each call adds, in item order — the same stage whether its
        calls ran together or one after another."""
        def one(item: T) -> tuple[R, list[str]]:
            own: list[str] = []
            return fn(item, own), own

        if self.ctx.llm is None:
            results = [one(item) for item in items]
        else:
            results = self.ctx.llm.fan_out("memory_builder", one, items, self.ctx.cancel, held=held)
        for _, own in results:
            notes.extend(own)
        return [value for value, _ in results]

    def honour_forget_requests(self, session: Session, memory: MemoryView, changes: Changes) -> None:
        """Delete every remembered item that carries what the user asked to forget in this session."""
        requests = forget_requests(session)
        if not requests:
            return
        candidates = list(memory.items.values()) + changes.upserts
        doomed = {i.id for i in candidates for r in requests if mentions(i.text, r)}
        changes.upserts = [i for i in changes.upserts if i.id not in doomed]
        changes.deletes += sorted(d for d in doomed if d in memory.items)
        for r in requests:
            changes.notes.append(f"forget request (turn {r.turn}): '{r.target}' → {len(doomed)} item(s) removed")

    def trace(self, query: str, purpose: Purpose, current: Session | None, retrieved: list[RetrievedItem],
              blocks: list[PromptBlock]) -> RetrievalTrace:
        context = render_context(blocks)
        return RetrievalTrace(method=self.name, query=redact_text(query), purpose=purpose,
                              as_of_session=current.sample_id if current else None, items=retrieved, blocks=blocks,
                              tokens=count_tokens(context), full_history_tokens=full_history_tokens(self.ctx.user, current),
                              token_counter=counter_name())

    def current_logs_block(self, current: Session | None) -> PromptBlock:
        """The current session's logs, one part per log: trimmed oldest first, and only after everything else."""
        if current is None:
            return PromptBlock(title="Logs of the current session", text="")
        parts = [BlockPart(text=text, label=f"{current.sample_id}#{j}", order=j)
                 for j, text in enumerate(rendered_logs(self.ctx.user, current))]
        return PromptBlock.of_parts("Logs of the current session", parts, "oldest_first", "logs", rank=9)


def rendered_logs(user: User, session: Session) -> list[str]:
    """Each log of ``session`` as :func:`render_log` renders it, redacted once per session object (every turn of
    its dialogue retrieves with them). Kept in the user's memo with the session they came from, so another session
    object at the same place (a changed copy of the user) is rendered afresh."""
    cache = user.derived_cache.setdefault("rendered_logs", {})
    kept = cache.get(session.index)
    if kept is None or kept[0] is not session:
        kept = cache[session.index] = (session, [render_log(session, j) for j in range(len(session.logs))])
    return kept[1]


def assistant_client(llm: LLMClient, method: MemoryMethod | None, current: Session | None = None) -> LLMClient:
    """``llm``, or a client whose ``assistant`` role is answered by the method's own provider (if it has one)."""
    provider = method.assistant_provider(current) if method is not None else None
    if provider is None:
        return llm
    return llm.with_provider("assistant", provider, **getattr(provider, "role_overrides", {}))
