"""Records of memory: items with provenance, retrieval traces with prompt blocks and token counts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backends.llm.context import Cut

Purpose = Literal["requirement", "solution"]
Trim = Literal["oldest_first", "lowest_score", "none"]


class MemoryItem(BaseModel):
    """One thing the assistant remembers, with where it came from.

    ``provenance`` lists sources as ``log:{sample_id}:{j}``, ``turn:{sample_id}:{t}`` or
    ``item:{item_id}``; forgetting an item forgets every item whose provenance reaches it.
    """

    model_config = ConfigDict(extra="forbid")
    id: str
    layer: str
    text: str
    session_id: str
    session_index: int
    provenance: list[str] = Field(default_factory=list)
    importance: float = 1.0
    meta: dict[str, Any] = Field(default_factory=dict)

    def same_content(self, other: MemoryItem) -> bool:
        return (self.text, self.layer, self.provenance, self.meta, self.importance) == (
            other.text, other.layer, other.provenance, other.meta, other.importance)


class Changes(BaseModel):
    """What ingesting one session did to the memory."""

    upserts: list[MemoryItem] = Field(default_factory=list)
    deletes: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # e.g. "forget request honoured: …", "LLM output invalid: …"


class RetrievedItem(BaseModel):
    item: MemoryItem
    score: float | None = None


class BlockPart(BaseModel):
    """One piece of a block that can be left out whole to fit a window: a session, an item, a log line."""

    text: str
    label: str  # what a cut names: a session id, an item id
    refs: list[str] = Field(default_factory=list)  # ids of the memory items it shows
    score: float | None = None  # retrieval score (lowest_score trims the lowest first; None last)
    order: int = 0  # time order (oldest_first trims the lowest first)


class PromptBlock(BaseModel):
    """A titled part of the prompt context. Blocks made of ``parts`` are trimmed by their ``trim`` policy,
    blocks of lower ``rank`` first (see :mod:`memory.fit`); other blocks are only shortened as a last resort."""

    title: str
    text: str
    parts: list[BlockPart] = Field(default_factory=list)
    trim: Trim = "none"
    unit: str = "items"  # what a cut of this block calls its parts
    rank: int = 0
    sep: str = "\n"

    @classmethod
    def of_parts(cls, title: str, parts: list[BlockPart], trim: Trim, unit: str, sep: str = "\n",
                 rank: int = 0) -> PromptBlock:
        return cls(title=title, text=sep.join(p.text for p in parts), parts=parts, trim=trim, unit=unit, rank=rank,
                   sep=sep)


def render_context(blocks: list[PromptBlock]) -> str:
    """The memory context the assistant reads: each non-empty block under its ``# title``."""
    return "\n\n".join(f"# {b.title}\n{b.text}" for b in blocks if b.text.strip())


class RetrievalTrace(BaseModel):
    """What a method put in front of the assistant for one query, and why."""

    method: str
    query: str
    purpose: Purpose
    as_of_session: str | None
    items: list[RetrievedItem] = Field(default_factory=list)
    blocks: list[PromptBlock] = Field(default_factory=list)
    tokens: int = 0
    full_history_tokens: int = 0
    token_counter: str = ""  # which counter made ``tokens`` and ``full_history_tokens``
    cuts: list[Cut] = Field(default_factory=list)  # what was left out to fit the assistant's window

    @property
    def context(self) -> str:
        return render_context(self.blocks)

    def summary(self) -> dict[str, Any]:
        return {
            "method": self.method, "query": self.query, "purpose": self.purpose, "as_of_session": self.as_of_session,
            "tokens": self.tokens, "full_history_tokens": self.full_history_tokens,
            "token_counter": self.token_counter, "cuts": [c.model_dump() for c in self.cuts],
            "items": [{"id": r.item.id, "layer": r.item.layer, "score": r.score, "text": r.item.text,
                       "session": r.item.session_id, "provenance": r.item.provenance} for r in self.items],
            "blocks": [{"title": b.title, "text": b.text} for b in self.blocks],
        }
