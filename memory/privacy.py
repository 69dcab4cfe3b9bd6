"""Privacy before memory: typed placeholders for sensitive data, and "please forget" requests.

Everything a method sees of a session passes through :func:`redact` first, so a phone number or a
card number never enters memory, a vector store or a prompt. Forget requests (PersonaMem-v2's
``ask_to_forget``) are found in the user's turns and honoured by every method.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memory.redaction import Redaction, redact

__all__ = ["ForgetRequest", "Redaction", "find_forget_requests", "keywords", "mentions", "redact", "redact_text"]


@functools.lru_cache(maxsize=8192)
def redact_text(text: str) -> str:
    """``text`` with placeholders. Memoised: a dialogue's earlier turns are redacted again for every new turn."""
    return redact(text)[0]


_FORGET = [
    re.compile(r"(?:please\s+)?(?:forget|don'?t remember|do not remember|stop remembering|erase|delete)\s+(?:that\s+|about\s+|the fact that\s+)?(?P<target>[^.!?\n]{3,200})", re.I),
    re.compile(r"(?:请)?(?:忘掉|忘记|别记住?|不要记住?|删掉|删除)(?:我)?(?:说过的?|的)?(?P<target>[^。！？\n]{2,100})"),
]


@dataclass(frozen=True)
class ForgetRequest:
    sample_id: str
    turn: int
    target: str


def find_forget_requests(sample_id: str, user_turns: list[tuple[int, str]]) -> list[ForgetRequest]:
    """``please forget …`` in the user's words (EN and ZH), with what is to be forgotten."""
    out = []
    for turn, text in user_turns:
        for pattern in _FORGET:
            m = pattern.search(text)
            if m:
                out.append(ForgetRequest(sample_id, turn, m.group("target").strip(" ,，:：")))
                break
    return out


_STOP = {"the", "a", "an", "i", "my", "me", "that", "about", "and", "or", "to", "of", "in", "on", "is", "am", "was",
         "it", "for", "with", "you", "please", "forget", "remember"}


def keywords(text: str) -> set[str]:
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'\-]{2,}", text)} - _STOP
    words |= set(re.findall(r"[\u4e00-\u9fff]{2}", text))
    return words


def mentions(text: str, request: ForgetRequest, min_overlap: float = 0.5) -> bool:
    """Does ``text`` carry what the request asks to forget (keyword overlap with the target)?"""
    target = keywords(request.target)
    if not target:
        return False
    hit = len(target & keywords(text)) / len(target)
    return hit >= min_overlap
