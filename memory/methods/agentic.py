"""Agentic memory (PersonaMem-v2, adapted from MemAgent): one human-readable memory, rewritten chunk by chunk.

As the paper: the history is **flattened** (each session's logs, then its dialogue, under a header line) and
cut into chunks of ``chunk_tokens`` tokens (5,000) regardless of session boundaries; after every chunk the LLM
rewrites the whole memory: keep what is still valid, add what the chunk reveals about the user's persona,
preferences and needs, as stand-alone bullet points. The memory is capped at ``memory_tokens`` tokens (2,048,
the paper's setting), counted with :func:`memory.tokens.count_tokens` (one token per CJK character, so a Chinese
memory gets the same budget as an English one). A rewrite over the cap is handed back to the model to compress
(at most ``compress_retries`` times); only if it is still over does the method keep the memory's leading whole
sentences that fit — text is never cut mid-sentence — and note it.

Built session by session, the method keeps the memory after the last **full** chunk (``meta.committed``) and the
flattened text since (``meta.pending``, less than a chunk). The memory it shows after a stage is that committed
memory rewritten once more with the pending text — exactly what the paper's loop gives a history that ends
there (its last chunk is partial) — and the next stage continues from the committed memory, so chunk boundaries
never depend on where the sessions end. Each rewrite asks for enough output tokens to hold the whole memory
(:func:`memory.agentic_sizes.answer_tokens`, not the role's ``max_tokens``); when the endpoint's window cannot
hold prompt + memory + chunk + answer at the paper's sizes, chunk and cap are lowered to fit and the build says
so (:func:`memory.agentic_sizes.negotiate`).

The memory is query-agnostic (the honest variant; see the PersonaMem-v2 notes), and the assistant
answers from it alone: the current session's logs were read into it at that session's logs stage,
so retrieval adds nothing else. The text after every chunk is kept in ``meta["chunk_snapshots"]``
(the last 20) so the app can replay how it grew.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field, create_model

from backends.prompts import load_prompt
from memory.agentic_sizes import Sizes, chunk_units, fit_to_tokens, negotiate, pack_units
from memory.base import (
    MemoryMethod,
    MemoryView,
    dialogue_turns,
    forget_requests,
    log_ref,
    render_log,
    turn_ref,
)
from memory.privacy import ForgetRequest, mentions
from memory.rewriting import (
    ROLE,
    ask,
    failure_note,
    forget_instruction,
    language_name,
    merge_refs,
    scrub,
    view_with,
)
from memory.sentences import sentences
from memory.tokens import count_tokens
from memory.types import Changes, MemoryItem, PromptBlock, Purpose, RetrievalTrace, RetrievedItem
from palset.dataset import Session

__all__ = ["AgenticMemory", "chunk_units", "fit_to_tokens", "memory_schema", "scrub", "sentences"]


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
                   "5k-token chunk of the flattened history (logs, then dialogue, across sessions); the assistant "
                   "sees only this memory, which has already read the current session's logs.")
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

    def sizes(self, sample: str) -> Sizes:
        """Chunk, cap and answer sizes for this build (the settings, or fitted to the window; see the module)."""
        chunk, cap = int(self.ctx.config.get("chunk_tokens", 5000)), int(self.ctx.config.get("memory_tokens", 2048))
        llm = self.ctx.llm
        if llm is None or not hasattr(llm, "budget"):
            return negotiate(chunk, cap, None, "", sample)
        prompt = load_prompt("memory/agentic_update")
        fixed = prompt.render(language=language_name(self.ctx.language), memory="", chunk="", forget="None.",
                              memory_tokens=cap)
        budget = llm.budget(ROLE, max_tokens=1, structured=memory_schema("AgenticMemoryUpdate", cap))
        return negotiate(chunk, cap, budget, fixed, sample)

    def _absorb(self, session: Session, memory: MemoryView, step: str, units: list[str], refs: list[str],
                requests: list[ForgetRequest]) -> Changes:
        changes = Changes()
        prev = memory.items.get(self.item_id)
        meta: dict[str, Any] = dict(prev.meta) if prev else {}
        committed = str(meta.get("committed", prev.text if prev else NO_MEMORY))
        pending: list[str] = list(meta.get("pending", []))
        header = f"## Session {session.sample_id} ({session.dialogue_timestamp:%Y-%m-%d}): " + (
            "device logs" if step == "logs" else "dialogue between the user and the assistant")
        sizes = Sizes(**meta["sizes"]) if isinstance(meta.get("sizes"), dict) else self.sizes("\n".join(units))
        if sizes.note and "sizes" not in meta:
            changes.notes.append(f"agentic memory: {sizes.note}")
        if requests:  # nothing asked to be forgotten may reach a later chunk
            pending = [u for u in pending if not any(mentions(u, r) for r in requests)]
        chunks = pack_units([*pending, header, *units], sizes.chunk_tokens)
        full, rest = chunks[:-1], chunks[-1] if chunks else []
        snapshots: list[dict[str, Any]] = list(meta.get("chunk_snapshots", []))
        n = int(meta.get("chunks", 0))
        for chunk in full:
            n += 1
            committed = self._rewrite(committed, "\n".join(chunk), f"memory update (chunk {n})", session, step,
                                      requests, sizes, changes, snapshots, n, provisional=False)
        shown = committed
        if rest:  # on failure the memory shown before is kept (it had read part of this)
            shown = self._rewrite(committed, "\n".join(rest), f"memory update (chunk {n + 1}, so far)", session, step,
                                  requests, sizes, changes, snapshots, n + 1, provisional=True,
                                  fallback=prev.text if prev is not None and not full else None)
        scrubbed = 0
        if requests:
            committed, dropped = scrub(committed, requests)
            shown, scrubbed = scrub(shown, requests)
            scrubbed += dropped
            for snap in snapshots:
                snap["text"] = scrub(snap["text"], requests)[0]
            if scrubbed:
                changes.notes.append(f"forget request: dropped {scrubbed} sentence(s) from the memory")
        prefixes = (f"log:{session.sample_id}:", f"turn:{session.sample_id}:")
        provenance = merge_refs(prev.provenance if prev else [], refs, prefixes) + [f"item:{self.item_id}"]
        changes.upserts.append(MemoryItem(
            id=self.item_id, layer="memory", text=shown or NO_MEMORY, session_id=session.sample_id,
            session_index=session.index, provenance=list(dict.fromkeys(provenance)),
            meta={**meta, "chunks": n, "committed": committed or NO_MEMORY, "pending": rest,
                  "pending_tokens": count_tokens("\n".join(rest)), "sizes": sizes.as_meta(),
                  "chunk_snapshots": snapshots[-MAX_SNAPSHOTS:]}))
        return changes

    def _rewrite(self, text: str, chunk: str, what: str, session: Session, step: str, requests: list[ForgetRequest],
                 sizes: Sizes, changes: Changes, snapshots: list[dict[str, Any]], n: int, provisional: bool,
                 fallback: str | None = None) -> str:
        """The memory rewritten after ``chunk``; when the model fails, ``fallback`` (else the previous memory) is
        kept and noted."""
        prompt = load_prompt("memory/agentic_update")
        schema = memory_schema("AgenticMemoryUpdate", sizes.memory_tokens)
        result = ask(self.ctx, prompt, schema, language=language_name(self.ctx.language), memory=text, chunk=chunk,
                     forget=forget_instruction(requests), memory_tokens=sizes.memory_tokens,
                     max_tokens=sizes.max_tokens)
        compressions = 0
        if result.ok:
            new_text, compressions = self._within_cap(result.value.memory.strip(), sizes, what, session, changes.notes)
            text = new_text or text
        else:
            changes.notes.append(failure_note(what, session, result, "memory"))
            text = fallback if fallback is not None else text
        snapshots.append({"chunk": n, "session": session.sample_id, "step": step, "provisional": provisional,
                          "ok": bool(result.ok), "text": text, "tokens": count_tokens(text),
                          "compressions": compressions})
        return text

    def _within_cap(self, text: str, sizes: Sizes, what: str, session: Session, notes: list[str]) -> tuple[str, int]:
        """(text within the cap, compressions asked for): an over-long rewrite goes back to the model to compress,
        at most ``compress_retries`` times; then the leading whole sentences that fit are kept."""
        limit = sizes.memory_tokens
        retries = int(self.ctx.config.get("compress_retries", 2))
        prompt = load_prompt("memory/agentic_compress")
        schema = memory_schema("AgenticMemoryCompressed", limit)
        tokens, asked = count_tokens(text), 0
        while tokens > limit and asked < retries:
            asked += 1
            res = ask(self.ctx, prompt, schema, language=language_name(self.ctx.language), memory=text,
                      tokens=tokens, memory_tokens=limit, max_tokens=sizes.max_tokens)
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
