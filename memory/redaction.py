"""Typed placeholders for sensitive values, alike in Chinese and English text.

Chinese is written without spaces, so a value sits directly against CJK characters ("请联系foo@x.com谢谢").
Python's ``\\b`` treats CJK characters as word characters and finds no boundary there, so every
pattern here bounds itself with explicit look-arounds on ASCII letters and digits instead. Phone
numbers are found by Google's libphonenumber (:mod:`phonenumbers`) for the dataset's locales (CN first;
PAL-Set is Chinese) rather than by a hand-written pattern; an international number written with ``+``
is taken whenever it is a possible number of its country.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import phonenumbers

# Regions whose national formats are recognised without a "+": PAL-Set (CN), its English release's readers.
PHONE_REGIONS: tuple[str, ...] = ("CN", "US", "GB")

_A = r"(?<![A-Za-z0-9_])"  # no ASCII word character before
_Z = r"(?![A-Za-z0-9_])"  # … nor after (CJK characters and full-width punctuation are boundaries)
_D0, _D1 = r"(?<!\d)", r"(?!\d)"  # no digit (ASCII or full-width) before / after

# Order matters: specific patterns (keys, cards, IBAN) before generic number runs.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("API_KEY", re.compile(
        r"(?<![A-Za-z0-9_\-])(?:(?:sk|pk|rk)-[A-Za-z0-9_\-]{12,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{20,}"
        r"|AIza[0-9A-Za-z_\-]{30,})(?![A-Za-z0-9_\-])")),
    ("EMAIL", re.compile(rf"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{{2,}}{_Z}")),
    ("CARD_NUMBER", re.compile(rf"(?<![\d+])(?:\d[ -]?){{12,18}}\d{_D1}")),
    ("ACCOUNT_NUMBER", re.compile(
        rf"{_A}[A-Z]{{2}}\d{{2}}(?: ?[A-Z0-9]{{4}}){{3,7}}(?: ?[A-Z0-9]{{1,3}})?{_Z}"
        rf"|(?:{_A}(?:account|acct)|账号|账户|帐号|卡号)\s*(?:no\.?|number|#)?\s*(?:是|为|:|：)?\s*(?P<v>(?=[A-Z\-]*\d)[A-Z0-9\-]{{6,20}}){_Z}",
        re.I)),
    ("ID_NUMBER", re.compile(
        rf"{_D0}\d{{6}}(?:19|20)\d{{2}}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{{3}}[\dXx]{_D1}"
        rf"|{_D0}\d{{3}}-\d{{2}}-\d{{4}}{_D1}"
        rf"|(?:{_A}(?:passport|licen[cs]e|ID)|身份证|护照|驾驶证|驾照)\s*(?:no\.?|number|#|号码?)?\s*(?:是|为|:|：)?\s*"
        rf"(?P<v>(?=[A-Z]*\d)[A-Z0-9]{{6,18}}){_Z}", re.I)),
    ("ADDRESS", re.compile(
        rf"{_D0}\d{{1,5}}\s+(?:[A-Z][a-z]+\s){{1,4}}(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Drive|Dr|Boulevard|Blvd"
        rf"|Court|Ct|Way|Place|Pl|Terrace){_Z}\.?(?:,?\s*(?:Apt|Unit|Suite|#)\s*[A-Za-z0-9]+)?"
        r"|[\u4e00-\u9fff]{2,8}(?:路|街|道)\d{1,5}号(?:[\u4e00-\u9fff\d]{0,10}(?:室|楼|栋|单元))?")),
]


@dataclass(frozen=True)
class Redaction:
    kind: str
    start: int
    end: int


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


_DIGIT_RUN = re.compile(r"\d(?:[\d \t().\-（）]*\d){6}")  # 7+ digits, separators allowed: a number could be a phone


def phone_spans(text: str, regions: tuple[str, ...] = PHONE_REGIONS) -> list[tuple[int, int]]:
    """(start, end) of every phone number in ``text``: valid numbers of ``regions``, and possible ``+`` numbers."""
    if not _DIGIT_RUN.search(text):  # the matcher costs ~1 ms a text; most texts hold no long number
        return []
    spans: set[tuple[int, int]] = set()
    for region in regions:
        for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            spans.add(_trim(text, m.start, m.end))
    for m in phonenumbers.PhoneNumberMatcher(text, regions[0], leniency=phonenumbers.Leniency.POSSIBLE):
        start, end = _trim(text, m.start, m.end)
        if text[start] == "+":
            spans.add((start, end))
    return _merge(sorted(spans))


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop brackets the matcher took along (it keeps "（" before a number) unless they hold an area code."""
    while start < end and not (text[start].isdigit() or text[start] == "+" or
                               (text[start] in "(（" and ")" in text[start:end].replace("）", ")"))):
        start += 1
    while end > start and not text[end - 1].isdigit():
        end -= 1
    return start, end


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _replace_spans(text: str, spans: list[tuple[int, int]], kind: str, found: list[Redaction]) -> str:
    for s, e in reversed(spans):
        found.append(Redaction(kind, s, e))
        text = text[:s] + f"[{kind}]" + text[e:]
    return text


def _pattern_step(kind: str, pattern: re.Pattern[str], keep: Callable[[str], bool] | None):
    def step(text: str, found: list[Redaction]) -> str:
        def repl(m: re.Match[str]) -> str:
            value = m.group(0)
            if keep is not None and not keep(value):
                return value
            found.append(Redaction(kind, m.start(), m.end()))
            if m.groupdict().get("v"):  # keep the label ("passport number"), replace the value
                return value[: m.start("v") - m.start()] + f"[{kind}]" + value[m.end("v") - m.start():]
            return f"[{kind}]"

        return pattern.sub(repl, text)

    return step


_CHECKS: dict[str, Callable[[str], bool]] = {"CARD_NUMBER": lambda v: _luhn(re.sub(r"\D", "", v))}
_STEPS = [_pattern_step(kind, pattern, _CHECKS.get(kind)) for kind, pattern in _PATTERNS[:5]]
_STEPS.append(lambda text, found: _replace_spans(text, phone_spans(text), "PHONE", found))
_STEPS.append(_pattern_step(*_PATTERNS[5], None))


def redact(text: str) -> tuple[str, list[Redaction]]:
    """Replace sensitive values with ``[KIND]`` placeholders; returns the text and what was replaced.

    Kinds: API_KEY, EMAIL, CARD_NUMBER, ACCOUNT_NUMBER, ID_NUMBER, PHONE, ADDRESS. Positions are those
    of the text as it stood when that kind was replaced (earlier kinds already replaced).
    """
    found: list[Redaction] = []
    for step in _STEPS:
        text = step(text, found)
    return text, found
