"""Records of memory: items with provenance, retrieval traces with prompt blocks and token counts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Purpose = Literal["requirement", "solution"]


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


class PromptBlock(BaseModel):
    title: str
    text: str


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

    @property
    def context(self) -> str:
        return "\n\n".join(f"# {b.title}\n{b.text}" for b in self.blocks if b.text.strip())

    def summary(self) -> dict[str, Any]:
        return {
            "method": self.method, "query": self.query, "purpose": self.purpose, "as_of_session": self.as_of_session,
            "tokens": self.tokens, "full_history_tokens": self.full_history_tokens,
            "items": [{"id": r.item.id, "layer": r.item.layer, "score": r.score, "text": r.item.text,
                       "session": r.item.session_id, "provenance": r.item.provenance} for r in self.items],
            "blocks": [b.model_dump() for b in self.blocks],
        }
