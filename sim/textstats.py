"""Surface features of a user turn, the same for simulated and dataset turns: length, questions, first person,
the language it is written in. Used by the style conditioning (:mod:`sim.style`) and by simulator fidelity's
distribution distances (:mod:`evaluation.simfidelity.aggregate`)."""

from __future__ import annotations

import re

from memory.tokens import count_tokens

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
_QUESTION = re.compile(r"[?？]+")
_FIRST_PERSON_EN = re.compile(r"\b(i|me|my|mine|myself|we|us|our|ours|ourselves)\b", re.I)
_FIRST_PERSON_ZH = re.compile(r"[我咱俺]")


def cjk_share(text: str) -> float:
    """Share of CJK ideographs among the letters (CJK ideographs and Latin letters) of ``text``; 0 without any."""
    cjk, latin = len(_CJK.findall(text)), len(_LATIN.findall(text))
    return cjk / (cjk + latin) if cjk + latin else 0.0


def language_of(text: str) -> str:
    """``zh`` when at least 30 % of the letters are CJK ideographs, else ``en``."""
    return "zh" if cjk_share(text) >= 0.3 else "en"


def length(text: str) -> int:
    """Tokens by the project's one counter (a CJK character is one token), so both languages compare."""
    return count_tokens(text)


def questions(text: str) -> int:
    """Questions asked: runs of ``?``/``？`` (``??`` is one)."""
    return len(_QUESTION.findall(text))


def first_person(text: str) -> bool:
    """Whether the turn speaks in the first person (I/me/my/we… or 我/咱/俺)."""
    return bool(_FIRST_PERSON_EN.search(text) or _FIRST_PERSON_ZH.search(text))


def features(text: str) -> dict[str, float]:
    """``length``, ``questions`` and ``first_person`` (0/1) of one turn."""
    return {"length": float(length(text)), "questions": float(questions(text)), "first_person": float(first_person(text))}
