"""Agentic memory (PersonaMem-v2, adapted from MemAgent): one human-readable memory, rewritten chunk by chunk.

Each session is flattened to text (its logs at the logs stage, its dialogue at the dialogue stage),
cut into chunks of at most ``chunk_tokens`` tokens, and after every chunk the LLM rewrites the whole
memory: keep what is still valid, add what the chunk reveals about the user's persona, preferences
and needs, as stand-alone bullet points, at most ``memory_chars`` characters (≈ 2k tokens). The
memory is query-agnostic (the honest variant; see the PersonaMem-v2 notes). The text after every
chunk is kept in ``meta["chunk_snapshots"]`` (the last 20) so the app can replay how it grew.
"""

from __future__ import annotations

from typing import Any

from backends.prompts import load_prompt
from memory.base import (
    MemoryMethod,
    MemoryView,
    dialogue_turns,
    forget_requests,
    log_ref,
    render_log,
    turn_ref,
)
from memory.privacy import ForgetRequest
from memory.rewriting import (
    ask,
    failure_note,
    forget_instruction,
    language_name,
    merge_refs,
    scrub,
    text_schema,
    view_with,
)
from memory.tokens import count_tokens
from memory.types import Changes, MemoryItem, PromptBlock, Purpose, RetrievalTrace, RetrievedItem
from palset.dataset import Session

# ---------------------------------------------------------------- chunking


def _split_unit(text: str, limit: int) -> list[str]:
    """Cut one over-long unit into word runs of at most ``limit`` tokens."""
    parts: list[str] = []
    current: list[str] = []
    used = 0
    for word in text.split(" "):
        n = max(1, count_tokens(word))
        if current and used + n > limit:
            parts.append(" ".join(current))
            current, used = [], 0
        current.append(word)
        used += n
    if current:
        parts.append(" ".join(current))
    return parts


def chunk_units(units: list[str], limit: int) -> list[str]:
    """Join units (log lines, dialogue turns) with newlines into chunks of at most ``limit`` tokens."""
    limit = max(1, limit)
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for unit in units:
        n = count_tokens(unit) + 1
        pieces = [unit] if n <= limit else _split_unit(unit, limit - 1)
        for piece in pieces:
            n = count_tokens(piece) + 1
            if current and used + n > limit:
                chunks.append("\n".join(current))
                current, used = [], 0
            current.append(piece)
            used += n
    if current:
        chunks.append("\n".join(current))
    return chunks


# ---------------------------------------------------------------- the method

NO_MEMORY = "No previous memory."
MAX_SNAPSHOTS = 20


class AgenticMemory(MemoryMethod):
    name = "agentic"
    label = "Agentic memory (PersonaMem-v2)"
    layers = ("memory",)
    uses_llm = True
    description = ("One human-readable memory of the user, rewritten by the LLM after every ≤5k-token chunk of the "
                   "history (logs, then dialogue); the assistant sees it plus the current session's logs.")
    default_config = {"chunk_tokens": 5000, "memory_chars": 8000}

    @property
    def item_id(self) -> str:
        return f"{self.ctx.user.uid}_memory"

    def ingest_logs(self, session: Session, memory: MemoryView) -> Changes:
        units = [render_log(session, j) for j in range(len(session.logs))]
        refs = [log_ref(session, j) for j in range(len(session.logs))]
        return self._absorb(session, memory, "logs", units, refs, [])

    def ingest_dialogue(self, session: Session, memory: MemoryView) -> Changes:
        turns = dialogue_turns(session)
        refs = [turn_ref(session, t) for t, _ in turns]
        requests = forget_requests(session)
        changes = self._absorb(session, memory, "dialogue", [text for _, text in turns], refs, requests)
        self.honour_forget_requests(session, view_with(memory, changes), changes)
        return changes

    def _absorb(self, session: Session, memory: MemoryView, step: str, units: list[str], refs: list[str],
                requests: list[ForgetRequest]) -> Changes:
        changes = Changes()
        prev = memory.items.get(self.item_id)
        text = prev.text if prev else NO_MEMORY
        meta = dict(prev.meta) if prev else {}
        snapshots: list[dict[str, Any]] = list(meta.get("chunk_snapshots", []))
        n = int(meta.get("chunks", 0))
        limit = int(self.ctx.config.get("memory_chars", 8000))
        header = f"Session {session.sample_id} ({session.dialogue_timestamp:%Y-%m-%d}): " + (
            "device logs" if step == "logs" else "dialogue between the user and the assistant")
        budget = int(self.ctx.config.get("chunk_tokens", 5000)) - count_tokens(header) - 8
        chunks = chunk_units(units, budget)
        prompt = load_prompt("memory/agentic_update")
        schema = text_schema("AgenticMemoryUpdate", "memory", limit,
                             "The whole updated memory: stand-alone bullet points about the user")
        updated = False
        for part, chunk in enumerate(chunks, 1):
            n += 1
            result = ask(self.ctx, prompt, schema, language=language_name(self.ctx.language), memory=text,
                         chunk=f"{header} (part {part} of {len(chunks)})\n{chunk}",
                         forget=forget_instruction(requests), memory_chars=limit)
            if result.ok:
                new_text = result.value.memory.strip()[:limit]
                if new_text:
                    text, updated = new_text, True
            else:
                changes.notes.append(failure_note(f"memory update (chunk {n}, {step} part {part})", session,
                                                  result, "memory"))
            snapshots.append({"chunk": n, "session": session.sample_id, "step": step, "part": part,
                              "ok": bool(result.ok), "text": text})
        scrubbed = 0
        if requests and (prev is not None or updated):
            text, scrubbed = scrub(text, requests)
            for snap in snapshots:
                snap["text"] = scrub(snap["text"], requests)[0]
            if scrubbed:
                changes.notes.append(f"forget request: dropped {scrubbed} sentence(s) from the memory")
        if not updated and not scrubbed:
            return changes
        prefixes = (f"log:{session.sample_id}:", f"turn:{session.sample_id}:")
        provenance = merge_refs(prev.provenance if prev else [], refs, prefixes) + [f"item:{self.item_id}"]
        changes.upserts.append(MemoryItem(
            id=self.item_id, layer="memory", text=text or NO_MEMORY, session_id=session.sample_id,
            session_index=session.index, provenance=list(dict.fromkeys(provenance)),
            meta={**meta, "chunks": n, "chunk_snapshots": snapshots[-MAX_SNAPSHOTS:]}))
        return changes

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        # PersonaMem-v2 answers from the query and the memory alone: the current session's logs were already
        # read into the memory at its logs stage, so they are not repeated here
        item = memory.items.get(self.item_id)
        blocks = [PromptBlock(title="Memory", text=item.text if item else "")]
        return self.trace(query, purpose, current, [RetrievedItem(item=item)] if item else [], blocks)
