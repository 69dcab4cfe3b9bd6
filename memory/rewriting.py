"""Helpers shared by the methods that rewrite a text memory with an LLM (agentic, RecurSum, MemoryBank):
bounded one-field output schemas, the forget instruction for prompts, the scrub that drops every
sentence still mentioning what the user asked to forget, and the structured call with its failure note."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, create_model

from backends.llm.types import StructuredFailure, StructuredResult
from backends.prompts import Prompt
from memory.base import MemoryView, MethodContext
from memory.privacy import ForgetRequest, mentions, redact_text
from memory.types import Changes, MemoryItem
from palset.dataset import Session

ROLE = "memory_builder"


def bounded_text(limit: int) -> Any:
    """A string field of at most ``limit`` characters; longer model output is cut, not rejected."""
    return Annotated[str, BeforeValidator(lambda v: v[:limit] if isinstance(v, str) else v), Field(max_length=limit)]


@lru_cache(maxsize=32)
def text_schema(name: str, field: str, limit: int, description: str) -> type[BaseModel]:
    """A one-field structured-output model ``{field: str}`` bounded to ``limit`` characters."""
    definitions: dict[str, Any] = {field: (bounded_text(limit), Field(description=description))}
    return create_model(name, **definitions)


def language_name(code: str) -> str:
    return {"zh": "Chinese (简体中文)", "en": "English"}.get(code, code)


def forget_instruction(requests: list[ForgetRequest]) -> str:
    """The line a rewrite prompt gets about what the user asked to forget ("None." when nothing)."""
    if not requests:
        return "None."
    targets = "\n".join(f"- {redact_text(r.target)}" for r in requests)
    return ("The user asked the assistant to forget the following. Remove it, and anything that reveals it, "
            f"from the memory; do not mention it or that it was removed:\n{targets}")


_BULLET = re.compile(r"^(\s*(?:[-*•]|\d+[.)])\s+)")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")


def scrub(text: str, requests: list[ForgetRequest]) -> tuple[str, int]:
    """Drop every bullet line or sentence of ``text`` that still mentions a forget request.

    Returns the cleaned text and how many sentences were dropped.
    """
    if not requests:
        return text, 0
    dropped = 0
    lines = []
    for line in text.splitlines():
        if not any(mentions(line, r) for r in requests):
            lines.append(line)
            continue
        m = _BULLET.match(line)
        prefix = m.group(1) if m else ""
        sentences = [s for s in _SENTENCE_END.split(line[len(prefix):]) if s.strip()]
        kept = [s for s in sentences if not any(mentions(s, r) for r in requests)]
        dropped += len(sentences) - len(kept)
        if kept:
            lines.append(prefix + " ".join(s.strip() for s in kept))
    return "\n".join(lines).strip(), dropped


def scrub_items(items: list[MemoryItem], requests: list[ForgetRequest], memory: MemoryView,
                changes: Changes) -> None:
    """Replace (in ``changes``) every item whose text still mentions a forget request by its scrubbed copy;
    an item left empty is deleted."""
    for item in items:
        cleaned, dropped = scrub(item.text, requests)
        if not dropped:
            continue
        changes.upserts = [u for u in changes.upserts if u.id != item.id]
        if cleaned:
            changes.upserts.append(item.model_copy(update={"text": cleaned}))
        elif item.id in memory.items:
            changes.deletes.append(item.id)
        changes.notes.append(f"forget request: dropped {dropped} sentence(s) from {item.id}")


def view_with(memory: MemoryView, changes: Changes) -> MemoryView:
    """``memory`` with ``changes`` applied (so forget handling sees the rewritten texts, not the old ones)."""
    items = {k: v for k, v in memory.items.items() if k not in changes.deletes}
    items.update({i.id: i for i in changes.upserts})
    return MemoryView(memory.stage, items, memory.forgotten)


def ask(ctx: MethodContext, prompt: Prompt, schema: type[BaseModel], max_tokens: int | None = None,
        **values: object) -> StructuredResult[Any] | StructuredFailure:
    """One structured call as ``memory_builder`` (``max_tokens``: this answer's budget, else the role's); endpoint
    failures raise (the stage is retried on resume)."""
    if ctx.llm is None:
        raise RuntimeError("this memory method needs an LLM (role memory_builder); none was given")
    extra: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens else {}
    return ctx.llm.structured(ROLE, prompt.messages(**values), schema, prompt=prompt, **extra)


def failure_note(step: str, session: Session, failure: StructuredFailure, kept: str) -> str:
    why = failure.errors[-1][:160] if failure.errors else "no valid output"
    return (f"{step} failed for {session.sample_id}: invalid model output after {failure.attempts} attempt(s) "
            f"({why}); kept the previous {kept}")


def merge_refs(previous: list[str], new: list[str], keep_prefixes: tuple[str, ...]) -> list[str]:
    """Refs of ``previous`` that start with one of ``keep_prefixes``, then ``new``, without duplicates."""
    out = [r for r in previous if r.startswith(keep_prefixes)] + new
    return list(dict.fromkeys(out))


