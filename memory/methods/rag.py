"""Retrieval baselines (Mem-PAL Appendix): turn-level and session-level RAG over earlier sessions.

Both add the top-k logs of earlier sessions and every log of the current session, with the same
embedder and k as H²Memory (k = 3).
"""

from __future__ import annotations

from memory.base import (
    MemoryMethod,
    MemoryView,
    dialogue_turns,
    log_ref,
    render_dialogue,
    render_log,
    scored_part,
    turn_ref,
)
from memory.types import Changes, MemoryItem, PromptBlock, Purpose, RetrievalTrace, RetrievedItem
from palset.dataset import Session


class _RAG(MemoryMethod):
    unit_layer = ""
    default_config = {"k": 3}

    def ingest_logs(self, session: Session, memory: MemoryView) -> Changes:
        return Changes(upserts=[
            MemoryItem(id=f"{session.sample_id}_log{j}", layer="log", text=render_log(session, j)[2:],
                       session_id=session.sample_id, session_index=session.index, provenance=[log_ref(session, j)])
            for j in range(len(session.logs))])

    def _search(self, layer: str, query: str, memory: MemoryView, current: Session | None) -> list[RetrievedItem]:
        k = int(self.ctx.config.get("k", 3))
        where = {"session_index": {"$lt": current.index}} if current is not None else None
        hits = self.ctx.index.search(layer, query, k, memory.stage, where=where, exclude=memory.forgotten)
        return [RetrievedItem(item=memory.items[i], score=s) for i, s in hits if i in memory.items]

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        units = self._search(self.unit_layer, query, memory, current)
        logs = self._search("log", query, memory, current)
        blocks = [  # fitting a window leaves out the lowest-scored items first
            PromptBlock.of_parts(f"Related {self.unit_layer}s from earlier sessions",
                                 [scored_part(r, f"[{r.item.session_id}] {r.item.text}") for r in units],
                                 "lowest_score", "items", sep="\n\n"),
            PromptBlock.of_parts("Related logs from earlier sessions",
                                 [scored_part(r, f"- [{r.item.session_id}] {r.item.text}") for r in logs],
                                 "lowest_score", "items"),
            self.current_logs_block(current),
        ]
        return self.trace(query, purpose, current, units + logs, blocks)


class TurnRAG(_RAG):
    name = "rag-turn"
    label = "Turn-level RAG"
    layers = ("turn", "log")
    unit_layer = "turn"
    description = "Top-3 dialogue turns and top-3 logs of earlier sessions, plus all current-session logs."

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        changes = Changes(upserts=[
            MemoryItem(id=f"{session.sample_id}_turn{t}", layer="turn", text=text, session_id=session.sample_id,
                       session_index=session.index, provenance=[turn_ref(session, t)])
            for t, text in dialogue_turns(session)])
        self.honour_forget_requests(session, memory, changes)
        return changes


class SessionRAG(_RAG):
    name = "rag-session"
    label = "Session-level RAG"
    layers = ("session", "log")
    unit_layer = "session"
    description = "Top-3 whole earlier dialogues and top-3 earlier logs, plus all current-session logs."

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        changes = Changes(upserts=[MemoryItem(
            id=f"{session.sample_id}_session", layer="session", text=render_dialogue(session),
            session_id=session.sample_id, session_index=session.index,
            provenance=[turn_ref(session, t) for t in range(1, len(session.turns) + 1)])])
        self.honour_forget_requests(session, memory, changes)
        return changes
