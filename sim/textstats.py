"""Surface features of a user turn, the same for simulated and dataset turns: length, questions, first person,
the language it is written in. Used by the style conditioning (:mod:`sim.style`) and by simulator fidelity's
distribution distances (:mod:`evaluation.simfidelity.aggregate`)."""

from __future__ import annotations

import re

from memory.tokens import count_tokens
from sim.rulebook import rule_pattern

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
_QUESTION = re.compile(r"[?？]+")


def cjk_share(text: str) -> float:
    """Share of CJK ideographs among the letters (CJK ideographs and Latin letters) of ``text``; 0 without any."""
    cjk, latin = len(CJK.findall(text)), len(_LATIN.findall(text))
    return cjk / (cjk + latin) if cjk + latin else 0.0


def detect_language(text: str) -> str:
    """The one language detector of the project (rule ``persona.language``, the stance rule, the fidelity checks):
    ``zh`` when at least half the letters are Chinese characters, ``en`` when at most a tenth are, ``mixed`` between,
    ``""`` for text without letters. A Chinese character carries about as much as a short English word, so Latin
    letters weigh 1/4."""
    cjk, latin = len(CJK.findall(text)), len(_LATIN.findall(text))
    total = cjk + latin / 4
    if total == 0:
        return ""
    share = cjk / total
    return "zh" if share >= 0.5 else "en" if share <= 0.1 else "mixed"


def language_of(text: str) -> str:
    """``zh`` or ``en`` where a choice must be made (:func:`detect_language`'s ``zh``, else ``en``)."""
    return "zh" if detect_language(text) == "zh" else "en"


def length(text: str) -> int:
    """Tokens by the project's one counter (a CJK character is one token), so both languages compare."""
    return count_tokens(text)


def questions(text: str) -> int:
    """Questions asked: runs of ``?``/``？`` (``??`` is one)."""
    return len(_QUESTION.findall(text))


def first_person(text: str) -> bool:
    """Whether the turn speaks in the first person (the pattern of rule ``persona.first_person``, both languages)."""
    return bool(rule_pattern("persona.first_person", "first_person").search(text))


def features(text: str) -> dict[str, float]:
    """``length``, ``questions`` and ``first_person`` (0/1) of one turn."""
    return {"length": float(length(text)), "questions": float(questions(text)), "first_person": float(first_person(text))}
