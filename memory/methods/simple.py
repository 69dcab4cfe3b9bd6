"""Baselines without retrieval: Vanilla (no memory), Vanilla with current-session logs, full history."""

from __future__ import annotations

from memory.base import MemoryMethod, MemoryView, render_dialogue, render_logs, turn_ref
from memory.types import BlockPart, Changes, MemoryItem, PromptBlock, Purpose, RetrievalTrace, RetrievedItem
from palset.dataset import Session


class Vanilla(MemoryMethod):
    uses_query = False  # retrieval ignores the query: no summarisation call needed
    name = "vanilla"
    label = "Vanilla (w/o log)"
    description = "No memory: the assistant sees only the dialogue so far (the paper's multi-turn default assistant)."

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        return self.trace(query, purpose, current, [], [])


class VanillaWithLog(MemoryMethod):
    uses_query = False  # retrieval ignores the query: no summarisation call needed
    name = "vanilla-log"
    label = "Vanilla (with log)"
    description = "All logs of the current session as '- [timestamp] content' lines; no dialogue history."

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        return self.trace(query, purpose, current, [], [self.current_logs_block(current)])


class FullHistory(MemoryMethod):
    """Long-context baseline: every earlier session's logs and dialogue, then the current logs."""

    uses_query = False  # retrieval ignores the query: no summarisation call needed
    name = "full-history"
    label = "Full history (long context)"
    layers = ("session_logs", "session_dialogue")
    groups_logs_in = "session_logs"
    description = "Everything so far in the prompt: all earlier logs and dialogues plus the current session's logs."

    def ingest_logs(self, session: Session, memory: MemoryView) -> Changes:
        item = MemoryItem(id=f"{session.sample_id}_logs", layer="session_logs", text=render_logs(session),
                          session_id=session.sample_id, session_index=session.index,
                          provenance=[f"log:{session.sample_id}:{j}" for j in range(len(session.logs))])
        return Changes(upserts=[item])

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        item = MemoryItem(id=f"{session.sample_id}_dialogue", layer="session_dialogue", text=render_dialogue(session),
                          session_id=session.sample_id, session_index=session.index,
                          provenance=[turn_ref(session, t) for t in range(1, len(session.turns) + 1)])
        changes = Changes(upserts=[item])
        self.honour_forget_requests(session, memory, changes)
        return changes

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        """Every earlier session (logs, then dialogue) oldest first — one part per session, so fitting a window
        leaves out the oldest sessions first — then the current session's logs."""
        items = sorted(memory.items.values(), key=lambda i: (i.session_index, i.layer != "session_logs"))
        history = [i for i in items if current is None or i.session_index < current.index]
        by_session: dict[int, list[MemoryItem]] = {}
        for i in history:
            by_session.setdefault(i.session_index, []).append(i)
        parts = [BlockPart(text="\n\n".join(f"## {i.session_id} {'logs' if i.layer == 'session_logs' else 'dialogue'}"
                                             f"\n{i.text}" for i in group),
                           label=group[0].session_id, refs=[i.id for i in group], order=index)
                 for index, group in by_session.items()]
        blocks = [PromptBlock.of_parts("Interaction history", parts, "oldest_first", "sessions", sep="\n\n"),
                  self.current_logs_block(current)]
        return self.trace(query, purpose, current, [RetrievedItem(item=i) for i in history], blocks)
