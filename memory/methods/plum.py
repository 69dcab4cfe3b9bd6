"""PLUM as a memory method: the memory is a per-user LoRA adapter, not text.

At each session's dialogue stage the LLM (role ``memory_builder``) writes QA pairs about it
(:mod:`memory.plum.qa`, stored as ``qa`` items viewable per session) and the adapter is trained on
them, starting from the previous session's checkpoint (:mod:`memory.plum.train`) — so the
:class:`~memory.build.MemoryBuilder`'s per-stage commits, progress and resume drive training too.
Retrieval returns no text: the assistant role is answered by base model + adapter through
:meth:`assistant_provider`, as of the session being answered (no later session leaks in).

Forgetting: forget-request turns never become QA pairs, and earlier pairs mentioning the target are
deleted from the memory; but what an adapter already learnt cannot be removed from its weights
short of retraining from the sessions before it (see the report in the Memory page notes).
"""

from __future__ import annotations

from typing import Any

from memory.base import MemoryMethod, MemoryView
from memory.plum.adapter import AdapterStore, Checkpoint
from memory.plum.qa import LAYER, QAWriter, item_pair, to_items
from memory.plum.train import Hyper
from memory.rewriting import view_with
from memory.types import Changes, PromptBlock, Purpose, RetrievalTrace
from palset.dataset import Session

HYPER_KEYS = tuple(Hyper.model_fields)


class Plum(MemoryMethod):
    name = "plum"
    label = "PLUM (memory in the weights)"
    layers = (LAYER,)
    uses_llm = True
    uses_query = False
    description = ("QA pairs about each past session (incl. things NOT discussed) train a per-user LoRA adapter "
                   "session by session; the assistant answers with base model + adapter, no text is retrieved.")
    default_config: dict[str, Any] = {"base_model": "bundled", "pairs_per_session": 4, "negatives_per_session": 4,
                                      "max_new_tokens": 160, "threads": 0, **Hyper().model_dump()}

    @property
    def hyper(self) -> Hyper:
        return Hyper.model_validate({k: self.ctx.config[k] for k in HYPER_KEYS if k in self.ctx.config})

    @property
    def adapters(self) -> AdapterStore:
        return AdapterStore(self.ctx.require_files())

    def base(self):
        from memory.plum.model import load_base

        return load_base(self.ctx.config.get("base_model"), int(self.ctx.config.get("threads", 0)))

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        writer = QAWriter(self.ctx)
        changes = Changes(upserts=to_items(session, writer.session_pairs(session, memory)), notes=writer.notes)
        self.honour_forget_requests(session, view_with(memory, changes), changes)
        pairs = [item_pair(i) for i in changes.upserts if i.layer == LAYER and i.session_id == session.sample_id]
        if not pairs:
            changes.notes.append(f"{session.sample_id}: no QA pairs, adapter unchanged")
            return changes
        ckpt = self._train(session, pairs)
        r = ckpt.record
        changes.notes.append(f"adapter trained on {r.pairs} QA pair(s): {r.steps} steps, loss {r.losses[0]:.3f} → "
                             f"{r.losses[-1]:.3f} in {r.seconds:.1f}s on {r.device} (version {r.version})")
        return changes

    def _train(self, session: Session, pairs: list[tuple[str, str]]) -> Checkpoint:
        from memory.plum.train import train_session

        position = next(p for p, s in enumerate(self.ctx.user.sessions) if s.sample_id == session.sample_id)
        return train_session(self.base(), self.adapters, sample_id=session.sample_id, session_index=session.index,
                             position=position, pairs=pairs, hyper=self.hyper)

    def checkpoint(self, current: Session | None) -> Checkpoint | None:
        """The adapter the assistant uses while answering in ``current`` (trained on earlier sessions only)."""
        return self.adapters.latest_before(current.index if current is not None else None)

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        ckpt = self.checkpoint(current)
        if ckpt is None:
            note = "No adapter trained yet: the assistant answers with the base model alone."
        else:
            n = len(self.adapters.checkpoints()) if current is None else sum(
                1 for c in self.adapters.checkpoints() if c.record.session_index < current.index)
            note = (f"In the weights: a LoRA adapter trained on {n} past session(s), through "
                    f"{ckpt.record.sample_id} (version {ckpt.record.version}). No text is retrieved.")
        return self.trace(query, purpose, current, [], [PromptBlock(title="Memory (PLUM)", text=note)])

    def assistant_provider(self, current: Session | None = None):
        from memory.plum.provider import PlumProvider

        return PlumProvider(self, current, dataset=self.ctx.dataset, user_id=self.ctx.user.uid,
                            config=self.ctx.config)
