"""Agentic memory (PersonaMem-v2, adapted from MemAgent): one human-readable memory, rewritten chunk by chunk.

Each session is flattened to text (its logs at the logs stage, its dialogue at the dialogue stage),
cut into chunks of at most ``chunk_tokens`` tokens, and after every chunk the LLM rewrites the whole
memory: keep what is still valid, add what the chunk reveals about the user's persona, preferences
and needs, as stand-alone bullet points. The memory is capped at ``memory_tokens`` tokens (2,048, the
paper's setting), counted with :func:`memory.tokens.count_tokens` (one token per CJK character, so a
Chinese memory gets the same budget as an English one). A rewrite over the cap is handed back to the
model to compress (at most ``compress_retries`` times); only if it is still over does the method keep
the memory's leading whole sentences that fit — text is never cut mid-sentence — and note it.

The memory is query-agnostic (the honest variant; see the PersonaMem-v2 notes), and the assistant
answers from it alone: the current session's logs were read into it at that session's logs stage,
so retrieval adds nothing else. The text after every chunk is kept in ``meta["chunk_snapshots"]``
(the last 20) so the app can replay how it grew.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field, create_model

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


# ---------------------------------------------------------------- the token cap

_SENTENCE = re.compile(r".*?(?:[。！？]+[”’」）)]*|[.!?]+[\"'”’)]*(?=\s|$)|$)\s*")  # "3.5" and "e.g.x" stay whole
_BULLET = re.compile(r"^(\s*(?:[-*•]|\d+[.)])\s+)")


def sentences(line: str) -> list[str]:
    """A line's sentences, each with its end punctuation and trailing space (Chinese and English stops)."""
    return [m.group(0) for m in _SENTENCE.finditer(line) if m.group(0).strip()]


def fit_to_tokens(text: str, limit: int) -> tuple[str, int]:
    """The leading whole lines of ``text`` — and of the first line that does not fit, its leading whole
    sentences — within ``limit`` tokens; (kept text, sentences dropped). Never cuts inside a sentence."""
    kept: list[str] = []
    lines = text.splitlines()
    dropped = 0
    for i, line in enumerate(lines):
        candidate = "\n".join([*kept, line])
        if count_tokens(candidate) <= limit:
            kept.append(line)
            continue
        m = _BULLET.match(line)
        prefix = m.group(1) if m else ""
        parts = sentences(line[len(prefix):])
        partial = ""
        for n, sentence in enumerate(parts):
            trial = (partial + sentence) if partial else prefix + sentence
            if count_tokens("\n".join([*kept, trial.rstrip()])) > limit:
                dropped += len(parts) - n
                break
            partial = trial
        if partial:
            kept.append(partial.rstrip())
        dropped += sum(len(sentences(rest)) for rest in lines[i + 1:])
        break
    return "\n".join(kept).strip(), dropped


@lru_cache(maxsize=16)
def memory_schema(name: str, limit_tokens: int) -> type[BaseModel]:
    """``{memory: str}``: the string bound is generous (16 characters a token, at least 32,000) so that neither a
    grammar nor validation cuts an overflowing rewrite before it can be compressed; the cap itself is enforced
    by counting tokens."""
    return create_model(name, memory=(str, Field(max_length=max(16 * limit_tokens, 32_000),
                                                 description="The whole memory: stand-alone bullet points about the user")))


# ---------------------------------------------------------------- the method

NO_MEMORY = "No previous memory."
MAX_SNAPSHOTS = 20


class AgenticMemory(MemoryMethod):
    name = "agentic"
    label = "Agentic memory (PersonaMem-v2)"
    layers = ("memory",)
    uses_llm = True
    description = ("One human-readable memory of the user (at most 2,048 tokens), rewritten by the LLM after every "
                   "≤5k-token chunk of the history (logs, then dialogue); the assistant sees only this memory, which "
                   "has already read the current session's logs.")
    default_config = {"chunk_tokens": 5000, "memory_tokens": 2048, "compress_retries": 2}

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
        limit = int(self.ctx.config.get("memory_tokens", 2048))
        header = f"Session {session.sample_id} ({session.dialogue_timestamp:%Y-%m-%d}): " + (
            "device logs" if step == "logs" else "dialogue between the user and the assistant")
        budget = int(self.ctx.config.get("chunk_tokens", 5000)) - count_tokens(header) - 8
        chunks = chunk_units(units, budget)
        prompt = load_prompt("memory/agentic_update")
        schema = memory_schema("AgenticMemoryUpdate", limit)
        updated = False
        for part, chunk in enumerate(chunks, 1):
            n += 1
            what = f"memory update (chunk {n}, {step} part {part})"
            result = ask(self.ctx, prompt, schema, language=language_name(self.ctx.language), memory=text,
                         chunk=f"{header} (part {part} of {len(chunks)})\n{chunk}",
                         forget=forget_instruction(requests), memory_tokens=limit)
            compressions = 0
            if result.ok:
                new_text, compressions = self._within_cap(result.value.memory.strip(), limit, what, session,
                                                          changes.notes)
                if new_text:
                    text, updated = new_text, True
            else:
                changes.notes.append(failure_note(what, session, result, "memory"))
            snapshots.append({"chunk": n, "session": session.sample_id, "step": step, "part": part,
                              "ok": bool(result.ok), "text": text, "tokens": count_tokens(text),
                              "compressions": compressions})
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

    def _within_cap(self, text: str, limit: int, what: str, session: Session, notes: list[str]) -> tuple[str, int]:
        """(text within ``limit`` tokens, compressions asked for): an over-long rewrite goes back to the model to
        compress, at most ``compress_retries`` times; then the leading whole sentences that fit are kept."""
        retries = int(self.ctx.config.get("compress_retries", 2))
        prompt = load_prompt("memory/agentic_compress")
        schema = memory_schema("AgenticMemoryCompressed", limit)
        tokens, asked = count_tokens(text), 0
        while tokens > limit and asked < retries:
            asked += 1
            res = ask(self.ctx, prompt, schema, language=language_name(self.ctx.language), memory=text,
                      tokens=tokens, memory_tokens=limit)
            if not res.ok:
                notes.append(failure_note(f"{what}: compression {asked}", session, res, "longer memory"))
                continue
            shorter = res.value.memory.strip()
            if shorter and count_tokens(shorter) < tokens:
                text, tokens = shorter, count_tokens(shorter)
        if tokens > limit:
            text, dropped = fit_to_tokens(text, limit)
            notes.append(f"{what}: still {tokens} tokens after {asked} compression(s), over the {limit}-token cap; "
                         f"kept the leading whole sentences that fit ({dropped} sentence(s) dropped)")
        return text, asked

    def retrieve(self, query: str, purpose: Purpose, memory: MemoryView, current: Session | None) -> RetrievalTrace:
        # PersonaMem-v2 answers from the query and the memory alone (the description says so): the current
        # session's logs were already read into the memory at its logs stage, so they are not repeated here
        item = memory.items.get(self.item_id)
        blocks = [PromptBlock(title="Memory", text=item.text if item else "")]
        return self.trace(query, purpose, current, [RetrievedItem(item=item)] if item else [], blocks)
