"""Build, resume, inspect and query a user's memory with any method.

``MemoryBuilder.run`` walks the user's sessions in time order, two stages per session (logs, then
dialogue; see :mod:`memory.store`), commits each stage atomically with its LLM cost, and skips the
stages a previous run finished — an interrupted build resumes where it stopped, and building
session by session gives the same memory as building all at once.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from backends.embeddings import Embedder
from backends.llm.client import LLMClient
from backends.llm.errors import Cancelled
from backends.llm.meter import CallMeter
from backends.llm.patience import again_on_timeout
from backends.vectorstore import VectorStore
from memory.base import MemoryMethod, MemoryView, MethodContext
from memory.index import VectorIndex
from memory.methods import get_method_class
from memory.store import BuildInfo, MemoryStore, derived_closure, dialogue_stage, logs_stage
from memory.types import Changes, MemoryItem, Purpose, RetrievalTrace
from palset.dataset import Dataset, Session, User

Progress = Callable[[int, int, str], None]  # (stages done, stages total, what just happened)


class BuilderOpener(Protocol):
    """Opens the builder of (dataset, user, method): :meth:`studio.workspace.Workspace.open_builder`."""

    def __call__(self, dataset: Dataset, user_id: str, method: str, *, llm: LLMClient | None = None) -> MemoryBuilder: ...


@dataclass
class MemoryBuilder:
    dataset: str
    user: User
    method: str
    store: MemoryStore
    vectors: VectorStore
    embedder: Embedder
    llm: LLMClient | None = None
    config: dict[str, Any] = field(default_factory=dict)
    files_root: Path | None = None  # where methods that keep files (PLUM) keep them: <root>/<method>/<dataset>/<user>/<build>
    build_id: str = ""
    meter: CallMeter = field(default_factory=CallMeter)  # this builder's calls: in flight, cached prompt tokens
    _indexed: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        cls = get_method_class(self.method)
        self.config = {**getattr(cls, "default_config", {}), **self.config, "embedder": self.embedder.name}
        self.build_id = self.store.open_build(self.dataset, self.user.uid, self.method, self.config)
        self.index = VectorIndex(self.vectors, self.dataset, self.user.uid, self.build_id)
        if self.llm is not None:
            self.llm = self.llm.for_run(self.build_id).metered(self.meter)  # accounted to this build only
        self.impl: MemoryMethod = cls(MethodContext(self.dataset, self.user, self.build_id, self.llm, self.embedder,
                                                    self.index, self.config, self._files()))

    def _files(self) -> Path | None:
        if self.files_root is None:
            return None
        slug = hashlib.sha1(self.dataset.encode()).hexdigest()[:10]
        return self.files_root / self.method / slug / self.user.uid / self.build_id

    # ------------------------------------------------------------------ building

    @property
    def total_stages(self) -> int:
        return 2 * len(self.user.sessions)

    def view(self, stage: int) -> MemoryView:
        """The memory right after ``stage`` (``-1``: empty), read through the store's parsed views (a new dict and
        set each time, the items shared)."""
        if stage < 0:
            return MemoryView(stage, {}, self.store.forgotten(self.build_id))
        items, hidden = self.store.view_as_of(self.build_id, stage)
        return MemoryView(stage, {i.id: i for i in items}, set(hidden))

    def run(self, until_session: int | None = None, progress: Progress | None = None,
            cancel: threading.Event | None = None) -> BuildInfo:
        """Ingest every session up to ``until_session`` (position, inclusive; default all)."""
        sessions = self.user.sessions
        last = len(sessions) - 1 if until_session is None else min(until_session, len(sessions) - 1)
        done = set(self.store.done_stages(self.build_id))
        total = 2 * (last + 1)
        self.impl.ctx.cancel = cancel  # a cancel also stops starting calls inside a stage (left unfinished, resumable)
        for pos in range(last + 1):
            session = sessions[pos]
            for stage, step in ((logs_stage(pos), "logs"), (dialogue_stage(pos), "dialogue")):
                if stage in done:
                    continue
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"build stopped before {session.sample_id} {step}")
                self._run_stage_patiently(session, pos, stage, step)
                if progress:
                    progress(stage + 1, total, f"{session.sample_id}: {step}")
        return self.store.info(self.build_id)

    def _run_stage_patiently(self, session: Session, pos: int, stage: int, step: str) -> None:
        """:meth:`_run_stage`; a stage whose call timed out runs once more with longer deadlines
        (:mod:`backends.llm.patience`) before the build fails, and the next run resumes at this stage."""

        def attempt(llm: LLMClient | None) -> None:
            self.impl.ctx.llm = llm
            try:
                self._run_stage(session, pos, stage, step)
            finally:
                self.impl.ctx.llm = self.llm

        again_on_timeout(self.llm, attempt, f"memory build {self.build_id} {session.sample_id} {step}")

    def _run_stage(self, session: Session, pos: int, stage: int, step: str) -> None:
        memory = self.view(stage - 1)
        calls_before = self._llm_totals()
        started = time.perf_counter()
        if step == "logs":
            changes = self.impl.ingest_logs(session, memory)
        else:
            changes = self.impl.ingest_dialogue(session, memory)
            nxt = self.user.sessions[pos + 1] if pos + 1 < len(self.user.sessions) else None
            if session.split == "history" and (nxt is None or nxt.split == "query"):
                after = self._apply_virtual(memory, changes)
                extra = self.impl.finish_history(after)
                changes = Changes(upserts=_merge(changes.upserts, extra.upserts),
                                  deletes=changes.deletes + extra.deletes, notes=changes.notes + extra.notes)
        seconds = time.perf_counter() - started
        calls, tin, tout = (a - b for a, b in zip(self._llm_totals(), calls_before))
        opened = self._opened_at()
        closing = [memory.items[i] for i in changes.deletes if i in memory.items]
        closing += [memory.items[i.id] for i in changes.upserts if i.id in memory.items
                    and not memory.items[i.id].same_content(i)]
        new = [i for i in changes.upserts if i.id not in memory.items or not memory.items[i.id].same_content(i)]
        if (searched := self.impl.indexed_layers) is not None:  # embed only what retrieval searches
            closing, new = [i for i in closing if i.layer in searched], [i for i in new if i.layer in searched]
        self.store.commit_stage(self.build_id, stage, session.sample_id, changes, llm_calls=calls, tokens_in=tin,
                                tokens_out=tout, seconds=seconds)
        if self.impl.index_on_build:
            self.index.close(closing, opened, stage)
            self.index.add(new, stage)
        self._indexed = False

    @staticmethod
    def _apply_virtual(memory: MemoryView, changes: Changes) -> MemoryView:
        items = {k: v for k, v in memory.items.items() if k not in changes.deletes}
        items.update({i.id: i for i in changes.upserts})
        return MemoryView(memory.stage + 1, items, memory.forgotten)

    def _opened_at(self) -> dict[str, int]:
        return self.store.opened_at(self.build_id)

    def _llm_totals(self) -> tuple[int, int, int]:
        if self.llm is None:
            return (0, 0, 0)
        t = self.llm.store.totals(run_id=self.build_id)
        return (t.calls, t.tokens_in, t.tokens_out)

    # ------------------------------------------------------------------ using

    def latest_stage(self) -> int:
        done = self.store.done_stages(self.build_id)
        return max(done) if done else -1

    def ensure_index(self) -> None:
        """Embed every stored version now when the vector store lacks some: a method that defers indexing
        (``index_on_build = False``), or a build whose items came without vectors (imported from a bundle,
        a deleted ``chroma/`` folder).

        Skipped when the vector store already holds as many versions as the run store (indexed while
        building, or by another process); upserts are by version id, so indexing twice changes nothing."""
        if self._indexed:
            return
        searched, hidden = self.impl.indexed_layers, self.store.forgotten(self.build_id)
        versions = [v for v in self.store.versions(self.build_id)
                    if (searched is None or v[0].layer in searched) and v[0].id not in hidden]
        if sum(self.index.count(layer) for layer in {v[0].layer for v in versions}) != len(versions):
            self.index.add_versions(versions)
        self._indexed = True

    def retrieve(self, query: str, purpose: Purpose, current: Session | None = None) -> RetrievalTrace:
        """Context for ``query`` during ``current``'s dialogue (memory as of its logs), or from the latest memory."""
        if current is not None:
            pos = [s.sample_id for s in self.user.sessions].index(current.sample_id)
            stage = logs_stage(pos)
            if stage not in set(self.store.done_stages(self.build_id)):
                self.run(until_session=pos)
        else:
            stage = self.latest_stage()
        self.ensure_index()
        return self.impl.retrieve(query, purpose, self.view(stage), current)

    def forget(self, item_ids: set[str], reason: str = "forgotten by a person") -> set[str]:
        """Forget items and everything derived from them (by provenance); returns every id forgotten."""
        all_versions = self._all_items()
        closure = derived_closure(all_versions, item_ids)
        self.store.forget(self.build_id, closure, reason)
        self.index.forget([i for i in all_versions if i.id in closure])
        return closure

    def edit(self, item_id: str, text: str, editor: str = "person") -> MemoryItem:
        """A person's new text for an item (the previous text is kept as an edit version)."""
        item = self.store.edit(self.build_id, item_id, text, editor)
        self.index.forget([item])
        opened = self._opened_at()
        searched = self.impl.indexed_layers
        if item_id in opened and (searched is None or item.layer in searched):
            self.index.add([item], opened[item_id])
        return item

    def _all_items(self) -> list[MemoryItem]:
        return self.store.all_versions(self.build_id)


def _merge(a: list[MemoryItem], b: list[MemoryItem]) -> list[MemoryItem]:
    by_id = {i.id: i for i in a}
    by_id.update({i.id: i for i in b})
    return list(by_id.values())
