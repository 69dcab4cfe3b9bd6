"""The agentic memory's text arithmetic: packing the flattened history into token-bounded chunks, keeping a memory
within its token cap by whole sentences, and negotiating chunk, memory and answer sizes with the endpoint's window.

PersonaMem-v2 cuts the flattened history into 5,000-token chunks and caps the memory at ~2,048 tokens; a rewrite
answers the *whole* memory, so its output budget must hold the cap (:func:`answer_tokens`: 1.25 × the cap + 64, so
an over-long rewrite can still be read and compressed). When the endpoint's window cannot hold
prompt + previous memory + chunk + answer at those sizes, :func:`negotiate` shrinks the chunk first (down to a
quarter of the window), then the memory cap — and says so — so a rewrite is never cut by the window.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass

from backends.llm.context import MESSAGE_OVERHEAD, REQUEST_OVERHEAD, Budget
from memory.sentences import sentences
from memory.tokens import count_tokens

Count = Callable[[str], int]
MIN_MEMORY = 128


def answer_tokens(memory_tokens: int) -> int:
    """The output budget a rewrite of a memory capped at ``memory_tokens`` gets."""
    return math.ceil(1.25 * memory_tokens) + 64


def _split_unit(text: str, limit: int, count: Count) -> list[str]:
    """Cut one over-long unit into word runs of at most ``limit`` tokens."""
    parts: list[str] = []
    current: list[str] = []
    used = 0
    for word in text.split(" "):
        n = max(1, count(word))
        if current and used + n > limit:
            parts.append(" ".join(current))
            current, used = [], 0
        current.append(word)
        used += n
    if current:
        parts.append(" ".join(current))
    return parts


def pack_units(units: list[str], limit: int, count: Count = count_tokens) -> list[list[str]]:
    """Units (log lines, dialogue turns, session headers) in order, packed into runs of at most ``limit`` tokens
    joined by newlines; a unit longer than that is cut into word runs."""
    limit = max(1, limit)
    chunks: list[list[str]] = []
    current: list[str] = []
    used = 0
    for unit in units:
        pieces = [unit] if count(unit) + 1 <= limit else _split_unit(unit, limit - 1, count)
        for piece in pieces:
            n = count(piece) + 1
            if current and used + n > limit:
                chunks.append(current)
                current, used = [], 0
            current.append(piece)
            used += n
    if current:
        chunks.append(current)
    return chunks


def chunk_units(units: list[str], limit: int, count: Count = count_tokens) -> list[str]:
    """:func:`pack_units`, each chunk joined by newlines."""
    return ["\n".join(c) for c in pack_units(units, limit, count)]


_BULLET = re.compile(r"^(\s*(?:[-*•]|\d+[.)])\s+)")


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


@dataclass(frozen=True)
class Sizes:
    """What one build uses: chunk and memory sizes (in :func:`memory.tokens.count_tokens` tokens), the rewrite's
    output budget (endpoint tokens), the window they were fitted to, and why they differ from the settings."""

    chunk_tokens: int
    memory_tokens: int
    max_tokens: int
    window: int | None = None
    note: str = ""

    def as_meta(self) -> dict:
        return asdict(self)


def negotiate(chunk_tokens: int, memory_tokens: int, budget: Budget | None, fixed_prompt: str, sample: str) -> Sizes:
    """Sizes that fit ``budget``'s window: the prompt without memory and chunk (``fixed_prompt``), the previous memory
    (at most the cap), the chunk and the answer. ``sample`` (history text) measures how many endpoint tokens an
    estimated token takes, so sizes counted by the estimate fit the endpoint's window."""
    if budget is None or budget.window is None:
        return Sizes(chunk_tokens, memory_tokens, answer_tokens(memory_tokens))
    ratio = max(1.0, budget.count(sample) / max(1, count_tokens(sample))) if sample.strip() else 1.0
    free = budget.window - REQUEST_OVERHEAD - budget.slack - budget.reserved - MESSAGE_OVERHEAD - budget.count(fixed_prompt)

    def chunk_room(memory: int) -> int:  # estimated tokens left for the chunk with a memory of that cap
        return int((free - answer_tokens(memory) - memory * ratio) / ratio)

    floor = min(chunk_tokens, max(64, budget.window // 4))
    memory = memory_tokens
    if chunk_room(memory) < floor:  # lower the memory cap until a quarter-window chunk fits
        memory = int((free - 64 - floor * ratio) / (1.25 + ratio))
    memory = max(MIN_MEMORY, min(memory_tokens, memory))
    chunk = max(16, min(chunk_tokens, chunk_room(memory)))
    if (chunk, memory) == (chunk_tokens, memory_tokens):
        return Sizes(chunk, memory, answer_tokens(memory), budget.window)
    note = (f"the window of {budget.window:,} tokens ({budget.window_source}) holds chunks of {chunk:,} tokens (set: "
            f"{chunk_tokens:,}) and a memory of {memory:,} (set: {memory_tokens:,}) with rewrites of up to "
            f"{answer_tokens(memory):,} tokens, so no rewrite is cut")
    return Sizes(chunk, memory, answer_tokens(memory), budget.window, note)
