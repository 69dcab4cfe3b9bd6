"""Sentences of a memory text: what the gold memory and the fidelity metrics both split items into."""

from __future__ import annotations

import re
from functools import lru_cache

MIN_CHARS = 4

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(A-Z0-9\[])|(?<=[。！？；;])|\n+")
# one sentence and the space after it; its end punctuation (Chinese or English stops, closing quotes) is ``stop``
_SENTENCE = re.compile(r".*?(?:(?P<stop>[。！？]+[”’」）)]*|[.!?]+[\"'”’)]*(?=\s|$))|$)\s*")  # "3.5", "e.g.x" stay whole
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


def sentences(line: str) -> list[str]:
    """A line's sentences, each with its end punctuation and trailing space (Chinese and English stops)."""
    return [m.group(0) for m in _SENTENCE.finditer(line) if m.group(0).strip()]


def whole_sentences(text: str) -> str:
    """``text`` up to the end of its last complete sentence (an answer cut by its token cap stops mid-sentence);
    the text as it is when no sentence in it ends."""
    ends = [m.end("stop") for m in _SENTENCE.finditer(text) if m.group("stop")]
    return text[:ends[-1]].strip() if ends else text
