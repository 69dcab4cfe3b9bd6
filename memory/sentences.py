"""Sentences of a memory text: what the gold memory and the fidelity metrics both split items into."""

from __future__ import annotations

import re
from functools import lru_cache

MIN_CHARS = 4

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(A-Z0-9\[])|(?<=[。！？；;])|\n+")
_PREFIX = re.compile(r"^(?:[-*•·]+\s*|\d+[.)]\s+|\[\d{4}-\d{2}-\d{2}[^\]]*\]\s*|(?:user|assistant)(?:\s*\([^)]*\))?:\s*)+",
                     re.I)


def split_sentences(text: str) -> list[str]:
    """Sentences and lines of ``text`` (English or Chinese punctuation), list markers and prefixes removed."""
    return list(_split(text or ""))


@lru_cache(maxsize=8192)
def _split(text: str) -> tuple[str, ...]:
    """Memoised: fidelity splits every item of every session's snapshot, and items persist from session to session."""
    out = []
    for part in _SENTENCE_END.split(text):
        part = _PREFIX.sub("", part.strip()).strip()
        if len(part.replace(" ", "")) >= MIN_CHARS:
            out.append(part)
    return tuple(out)
