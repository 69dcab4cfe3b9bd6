"""Privacy before memory: typed placeholders for sensitive data, and "please forget" requests.

Everything a method sees of a session passes through :func:`redact` first, so a phone number or a
card number never enters memory, a vector store or a prompt. Forget requests (PersonaMem-v2's
``ask_to_forget``) are found in the user's turns and honoured by every method.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# Order matters: specific patterns (keys, cards, IBAN) before generic number runs.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("API_KEY", re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{12,}\b|\bAKIA[0-9A-Z]{16}\b|\bghp_[A-Za-z0-9]{20,}\b|\bAIza[0-9A-Za-z_\-]{30,}\b")),
    ("EMAIL", re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")),
    ("CARD_NUMBER", re.compile(r"\b(?:\d[ -]?){13,19}\b(?<![ -])")),
    ("ACCOUNT_NUMBER", re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}(?: ?[A-Z0-9]{1,3})?\b|(?:account|acct|账号|账户)\s*(?:no\.?|number|#|:|：)?\s*(?P<v>[A-Z0-9\-]{6,20})", re.I)),
    ("ID_NUMBER", re.compile(r"(?<![0-9])\d{6}(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx](?![0-9])|\b\d{3}-\d{2}-\d{4}\b|(?:passport|licen[cs]e|ID|身份证|护照|驾驶证|驾照)\s*(?:no\.?|number|#|:|：|号码?|是)?\s*(?P<v>[A-Z0-9]{6,18})\b", re.I)),
    ("PHONE", re.compile(r"(?<![0-9A-Za-z])(?:\+?\d{1,3}[ .\-]?)?(?:\(\d{2,4}\)[ .\-]?)?\d{3,4}[ .\-]?\d{3,4}[ .\-]?\d{0,4}(?![0-9A-Za-z])")),
    ("ADDRESS", re.compile(r"\b\d{1,5}\s+(?:[A-Z][a-z]+\s){1,4}(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Drive|Dr|Boulevard|Blvd|Court|Ct|Way|Place|Pl|Terrace)\b\.?(?:,?\s*(?:Apt|Unit|Suite|#)\s*\w+)?|[\u4e00-\u9fff]{2,8}(?:路|街|道)\d{1,5}号(?:[\u4e00-\u9fff\d]{0,10}(?:室|楼|栋|单元))?")),
]


@dataclass(frozen=True)
class Redaction:
    kind: str
    start: int
    end: int


def redact(text: str) -> tuple[str, list[Redaction]]:
    """Replace sensitive values with ``[KIND]`` placeholders; returns the text and what was replaced."""
    found: list[Redaction] = []
    out = text
    for kind, pattern in _PATTERNS:
        def repl(m: re.Match[str], kind: str = kind) -> str:
            value = m.group(0)
            if kind == "PHONE" and not _looks_like_phone(value):
                return value
            if kind == "CARD_NUMBER" and not _luhn(re.sub(r"\D", "", value)):
                return value
            found.append(Redaction(kind, m.start(), m.end()))
            if m.groupdict().get("v"):  # keep the label ("passport number"), replace the value
                return value[: m.start("v") - m.start()] + f"[{kind}]" + value[m.end("v") - m.start():]
            return f"[{kind}]"

        out = pattern.sub(repl, out)
    return out, found


def _looks_like_phone(value: str) -> bool:
    digits = re.sub(r"\D", "", value)
    if not 8 <= len(digits) <= 15:
        return False
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()) or re.fullmatch(r"\d{1,2}:\d{2}", value.strip()):
        return False
    return bool(re.search(r"[ .\-()+]", value.strip())) or len(digits) >= 10


def _luhn(digits: str) -> bool:
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


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
