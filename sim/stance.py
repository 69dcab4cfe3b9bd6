"""A rule-based classifier of a user turn's stance toward what the assistant just said, in English and Chinese.

Labels: ``accept`` (confirms the guess / approves the proposal), ``reject`` (denies / rejects), ``partial``
(approval hedged or with a reservation — the "sounds good, but…" Mem-PAL's user must never say) and ``none``
(no verdict: a question, a detail, an opening). The same labels serve Requirement Confirmation (accept = confirm,
reject/partial = correct) and Solution Feedback.

The rules, in order: cue phrases are found (negated and reported forms first, so "not good", "不行", "say no" do
not count as their positive or negative parts; what a question asks is blanked — its whole sentence, or only its last
clause where a statement comes first: "I agree with this option, but where do I start?"); then

1. no accepting and no rejecting cue: ``partial`` when a hedge ("maybe", "not sure", "也许") is present; ``reject``
   when the turn opens with a short echo question followed by more ("An app? My customers…", "住他那儿？…"); else
   ``none``;
2. only accepting cues: ``accept``, or ``partial`` when a hedge comes before or in the sentence of the first one;
3. a hedge before the first verdict cue ("Sort of, but that's not it", "有一点吧，但不是主要的"): ``partial``;
4. only rejecting cues: ``reject``;
5. both: ``partial`` when a contrast ("but", "但是", "不过") follows the first accepting cue and precedes a
   rejecting one; else whichever cue comes first.

A first clause with cues of one side only and no hedge decides before all of these ("Yes, …", "不行，…"); an
approval whose next clause opens with a contrast or a hedge ("Sounds good, but …", "Okay, as long as …") is
``partial``.

The cue phrases are data: ``sim/rules/stance.<language>.toml`` (rule ``stance`` of :mod:`sim.rulebook`). Measured on
the held-out split of the labelled stance corpus (``tests/sim/corpus/stance.jsonl``, ``pal simulate corpus``,
``bench/stance_corpus.py``; FIDELITY.md gives the figures). The judge-based classifier with the same labels is
:func:`evaluation.simfidelity.judges.judge_stance`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from sim.rulebook import compile_label, load_rule_data
from sim.textstats import language_of

Stance = Literal["accept", "reject", "partial", "none"]
STANCES: tuple[str, ...] = ("accept", "reject", "partial", "none")


LABELS = ("masked_accept", "masked_reject", "reported", "accept", "reject", "hedge", "contrast", "guess")


@dataclass(frozen=True)
class Lexicon:
    """The stance rule's cue patterns of one language, compiled from its data file (``sim/rules/stance.<lang>.toml``,
    :mod:`sim.rulebook`): one regex per label, the opening echo question and its word limit."""

    patterns: dict[str, re.Pattern[str]]
    echo: re.Pattern[str]
    echo_words: int

    def __getitem__(self, label: str) -> re.Pattern[str]:
        return self.patterns[label]


@cache
def lexicon(language: str) -> Lexicon:
    """The compiled lexicon of ``language`` (``en`` phrases are whole words; a label's longest cue is tried first)."""
    data = load_rule_data("stance", language)
    patterns = {label: compile_label(data.entries(label), bounded=language == "en", longest_first=True)
                for label in LABELS}
    return Lexicon(patterns, re.compile(str(data.params["echo_question"])), int(data.params.get("echo_words", 0)))


@dataclass
class StanceResult:
    label: Stance
    cues: dict[str, list[str]] = field(default_factory=dict)  # accept / reject / hedge / contrast → phrases found

    def evidence(self) -> dict:
        return {"label": self.label, "cues": self.cues}


def _find(pattern: re.Pattern[str], text: str) -> list[tuple[int, str]]:
    return [(m.start(), m.group(0)) for m in pattern.finditer(text)]


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


_CLAUSE_END = re.compile(r"[,.;:!?，。；：！？…]")


def _leading(text: str, accept: list, reject: list, hedge: list, contrast: list) -> Stance | None:
    """The first clause decides when it holds cues of one side only and no hedge: "Yes, …", "No. …", "不行，…";
    an approval whose next clause opens with a contrast or a hedge ("Sounds good, but …", "Okay, as long as …") is
    ``partial``."""
    ends = [m.end() for m in _CLAUSE_END.finditer(text)]
    if not ends:
        return None
    first = ends[0]
    a = [p for p, _ in accept if p < first]
    r = [p for p, _ in reject if p < first]
    if bool(a) == bool(r) or any(p < first for p, _ in hedge):
        return None
    if r:
        return "reject"
    after = text[first:].lstrip()
    opens_next = any(p >= first and text[first:p].strip() == "" for p, _ in contrast + hedge)
    return "partial" if opens_next and after else "accept"


_SENTENCE_END = re.compile(r"[.!?。！？]")


def _sentence_end(text: str, pos: int) -> int:
    """Where the sentence holding position ``pos`` ends."""
    m = _SENTENCE_END.search(text, pos)
    return m.end() if m else len(text)


def _echo(text: str, language: str) -> bool:
    """A short opening question echoing the proposal, then more ("An app? My customers are plumbers…", "住他那儿？…"):
    a turn that has no cue but opens this way turns the proposal down."""
    lex = lexicon(language)
    m = lex.echo.match(text)
    if m is None:
        return False
    return not lex.echo_words or len(text[:m.end()].split()) <= lex.echo_words + 1


_QUESTION_SENTENCE = re.compile(r"[^.!?。！？]*[?？]")
_CLAUSE_BREAK = re.compile(r"[,;，；]")


def _blank_questions(text: str) -> str:
    """Blank what questions ask (no verdict: only statements count) — the whole sentence, or only its last clause
    where a statement comes first in the same sentence ("I agree with this option, but where do I start?")."""
    def blank(m: re.Match[str]) -> str:
        sentence = m.group(0)
        breaks = list(_CLAUSE_BREAK.finditer(sentence))
        keep = breaks[-1].end() if breaks else 0
        return sentence[:keep] + " " * (len(sentence) - keep)
    return _QUESTION_SENTENCE.sub(blank, text)


def classify_stance(text: str, language: str | None = None, answering: str | None = None) -> StanceResult:
    """The stance of one user turn (see the module docstring); ``language`` ``zh``/``en`` (default: by script);
    ``answering="guess"``: the turn replies to a guess about the user's need (more ways to confirm count)."""
    lang = "zh" if (language or language_of(text)) == "zh" else "en"
    rules = lexicon(lang)
    text = text.strip()
    asked = _blank_questions(text)
    masked_a = _find(rules["masked_accept"], asked)
    if answering == "guess":
        guess = rules["guess"]
        masked_a = sorted(masked_a + _find(guess, asked))
        asked = _blank(asked, guess)
    body = _blank(_blank(asked, rules["masked_accept"]), rules["reported"])
    hedge, contrast = _find(rules["hedge"], body), _find(rules["contrast"], body)
    body = _blank(body, rules["hedge"])  # "not sure" hedges; its "sure" is no approval
    masked_r = _find(rules["masked_reject"], body)
    rest = _blank(body, rules["masked_reject"])
    accept = sorted(masked_a + _find(rules["accept"], rest))
    reject = sorted(masked_r + _find(rules["reject"], rest))
    cues = {k: [p for _, p in v] for k, v in
            (("accept", accept), ("reject", reject), ("hedge", hedge), ("contrast", contrast)) if v}
    if (lead := _leading(text, accept, reject, hedge, contrast)) is not None:
        return StanceResult(lead, cues)
    if not accept and not reject:
        if not hedge and _echo(text, lang) and not text.rstrip().endswith(("?", "？")):
            cues["reject"] = ["(an opening echo question)"]
            return StanceResult("reject", cues)
        return StanceResult("partial" if hedge else "none", cues)
    if accept and not reject:
        end = _sentence_end(text, accept[0][0])
        return StanceResult("partial" if any(p < end for p, _ in hedge) else "accept", cues)
    if any(p < min(pos for pos, _ in accept + reject) for p, _ in hedge):
        return StanceResult("partial", cues)  # a hedge before any verdict: "Sort of, but that's not it."
    if reject and not accept:
        return StanceResult("reject", cues)
    first_a, first_r = accept[0][0], reject[0][0]
    if first_a < first_r and any(first_a < pos < max(p for p, _ in reject) for pos, _ in contrast):
        return StanceResult("partial", cues)
    return StanceResult("accept" if first_a < first_r else "reject", cues)
