"""What "in persona" means — one definition, read by the simulator (a draft failing it is asked again), by
``pal runs check`` and by the simulator-fidelity check ``persona``.

A user turn is in persona when none of these turn rules (:mod:`sim.rulebook`; patterns in ``sim/rules/``) fires:

- ``persona.offer`` — an assistant-style greeting or offer, or talk about the chat itself;
- ``persona.narrates_user`` / ``persona.narrates_assistant`` — narration about "the user" (or the user's full name)
  or about the assistant: a summary, not the user speaking;
- ``persona.first_person`` — no first person, unless a short reaction or a question of the user's own (a question
  guessing at the other side's needs, as the assistant does, does not count);
- ``persona.language`` — not in the user's language (:func:`sim.textstats.detect_language`);
- ``persona.salutation`` — only a salutation to the assistant;
- ``persona.prompt_talk`` — the prompt's own terms;
- ``persona.echo`` — most of the turn copied from a given text (the assistant's last message, the prompt's cue).

Two more rules guard a simulated turn without being part of "in persona": ``turn.repeat`` (:func:`repeats_earlier`)
and ``turn.gives_away`` (:meth:`HiddenNeed.given_away`); :func:`user_turn_reasons` applies all of them.
Pure functions (no model, no I/O).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from sim.rulebook import RULES, load_rule_data, rule_pattern
from sim.textstats import CJK as _CJK
from sim.textstats import detect_language

__all__ = ["ASSISTANT_NARRATION", "GUESS", "NARRATION_EN", "NARRATION_ZH", "OFFER", "PROMPT_TALK", "SALUTATION",
           "HiddenNeed", "PersonaVerdict", "detect_language", "echoes", "flat_text", "in_language", "lasting_reasons",
           "repeats_earlier", "speaks_as_user", "stray_chinese", "user_turn_reasons"]

OFFER = rule_pattern("persona.offer", "offer")
NARRATION_EN = rule_pattern("persona.narrates_user", "narration", ("en",))
NARRATION_ZH = rule_pattern("persona.narrates_user", "narration", ("zh",))
ASSISTANT_NARRATION = rule_pattern("persona.narrates_assistant", "narration")
SALUTATION = rule_pattern("persona.salutation", "salutation")
PROMPT_TALK = rule_pattern("persona.prompt_talk", "prompt_talk")
QUESTION = rule_pattern("persona.first_person", "question")
GUESS = rule_pattern("persona.first_person", "guess_question")
FIRST_PERSON = rule_pattern("persona.first_person", "first_person")
_SHORT = load_rule_data("persona.first_person", "en").params

SHORT_WORDS = int(_SHORT["short_words"])  # a short reaction passes without the first person: at most this many words…
SHORT_CJK = int(_SHORT["short_cjk"])  # …or Chinese characters
ECHO_GRAM = 6  # rule persona.echo (and turn.repeat, turn.gives_away): 6-character pieces…
ECHO_SHARE = 0.6  # …of which this share is copied
_NOT_TEXT = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class PersonaVerdict:
    """Whether a turn speaks as the user, why not, and the language it was written in."""

    ok: bool
    reasons: tuple[str, ...]
    language: str  # detect_language's answer


def stray_chinese(text: str, language: str) -> bool:
    """Whether an English user's ``text`` holds a Chinese character. The language rule lets a tenth of the letters
    be Chinese; a clause appended to fixed words (:mod:`sim.decision`) must hold none."""
    return language == "en" and bool(_CJK.search(text))


def in_language(text: str, language: str) -> bool:
    """Whether ``text`` is written in ``language`` (``zh`` or ``en``; other codes: not judged, True)."""
    if language not in ("zh", "en"):
        return True
    return detect_language(text) == language


def _short(text: str) -> bool:
    cjk = len(_CJK.findall(text))
    return cjk <= SHORT_CJK if cjk else len(text.split()) <= SHORT_WORDS


def flat_text(text: str) -> str:
    """``text`` lower-cased with only its letters and digits: what the echo and repeat rules compare."""
    return _NOT_TEXT.sub("", text.lower())


@lru_cache(maxsize=256)
def _grams(text: str) -> frozenset[str]:
    """The ``ECHO_GRAM``-character pieces of ``text`` (kept for the texts compared last: a turn is compared with the
    same sources — the persona, the prompt, earlier turns — as the turns before it)."""
    flat = flat_text(text)
    return frozenset(flat[i:i + ECHO_GRAM] for i in range(max(len(flat) - ECHO_GRAM + 1, 0)))


def echoes(text: str, source: str) -> bool:
    """Whether most of ``text`` (``ECHO_SHARE`` of its 6-character pieces) is copied from ``source``."""
    mine = _grams(text)
    return bool(mine) and len(mine & _grams(source)) >= ECHO_SHARE * len(mine)


def names_self(text: str, name: str) -> bool:
    """Whether ``text`` holds the user's full ``name`` (a first name alone may be someone else's)."""
    return bool(name.strip()) and name.strip() in text


def lasting_reasons(text: str, name: str = "") -> list[str]:
    """The reasons ``text`` is not in persona that no words after it can undo (a pattern once written stays in the
    turn): ``persona.offer``, ``persona.narrates_user`` (also the user's full ``name``),
    ``persona.narrates_assistant``, ``persona.prompt_talk``. Copying, the first person and the language are shares of the whole turn and can change.
    Apart because a draft streamed to the server is stopped as soon as one of them shows (:mod:`sim.simulator`)."""
    found = {"persona.offer": bool(OFFER.search(text)),
             "persona.narrates_user": bool(NARRATION_EN.search(text) or NARRATION_ZH.search(text)
                                           or names_self(text, name)),
             "persona.narrates_assistant": bool(ASSISTANT_NARRATION.search(text)),
             "persona.prompt_talk": bool(PROMPT_TALK.search(text))}
    return [RULES[rule].reason for rule, hit in found.items() if hit]


def repeats_earlier(text: str, earlier: Sequence[str]) -> bool:
    """Whether ``text`` says one of ``earlier`` (the same speaker's turns before it in the dialogue) again, word for
    word — letters and digits compared, case, spaces and punctuation aside — or nearly (most of it copied:
    :func:`echoes`) — rule ``turn.repeat``. A short reaction ("No, not that.", "不对，不是这个。") may rightly come
    twice, not a third time word for word."""
    flat = flat_text(text)
    if not flat:
        return False
    if _short(text):  # a short reaction may come twice, not a third time
        return sum(flat == flat_text(e) for e in earlier) >= 2
    return any(flat == flat_text(e) or echoes(text, e) for e in earlier)


REPEATS_EARLIER = RULES["turn.repeat"].reason
GIVES_AWAY = RULES["turn.gives_away"].reason


@dataclass(frozen=True)
class HiddenNeed:
    """What no user turn may copy (rule ``turn.gives_away``) — the topic's requirement, implicit needs and liked and
    disliked solutions, which the assistant is to find out (:func:`sim.prompting.hidden_need`) — and the user query,
    which a turn may say in its own words (the query and the need often share words)."""

    texts: tuple[str, ...]
    query: str

    def given_away(self, text: str) -> bool:
        """Whether ``text`` mostly copies these texts taken together (:func:`echoes`) but not the user query. Together,
        not one by one: two needs stitched into one sentence copy the need though neither makes up most of it."""
        return bool(self.texts) and echoes(text, self._together) and not echoes(text, self.query)

    @cached_property
    def _together(self) -> str:
        """The texts joined once per run (every draft of every user turn is checked against them)."""
        return "\n".join(self.texts)


def user_turn_reasons(text: str, language: str, sources: Sequence[str], name: str, earlier: Sequence[str],
                      hidden: HiddenNeed | None = None) -> tuple[str, ...]:
    """Why a simulated user's turn is asked again (empty: it is kept): the persona rule (:func:`speaks_as_user`),
    the repeat rule against the user's ``earlier`` turns (:func:`repeats_earlier`) and giving away the need
    (``hidden``, :meth:`HiddenNeed.given_away`)."""
    reasons = speaks_as_user(text, language, sources, name).reasons
    reasons += (REPEATS_EARLIER,) if repeats_earlier(text, earlier) else ()
    return reasons + ((GIVES_AWAY,) if hidden is not None and hidden.given_away(text) else ())


def speaks_as_user(text: str, language: str, sources: Sequence[str] = (), name: str = "") -> PersonaVerdict:
    """"In persona" (the module docstring) for one turn of a user whose language is ``language`` (``zh``/``en``);
    ``sources``: texts the turn must not copy (the assistant's last message, the prompt's cue); ``name``: the
    user's full name — a user does not write it about themselves (:func:`names_self`)."""
    found = detect_language(text)
    reasons: list[str] = []
    if any(echoes(text, source) for source in sources if source):
        reasons.append(RULES["persona.echo"].reason)
    reasons += lasting_reasons(text, name)
    if SALUTATION.search(text):
        reasons.append(RULES["persona.salutation"].reason)
    own_question = bool(QUESTION.search(text)) and not GUESS.search(text)
    if not (FIRST_PERSON.search(text) or _short(text) or own_question):
        reasons.append(RULES["persona.first_person"].reason)
    if not in_language(text, language):
        reasons.append(f"{RULES['persona.language'].reason} ({language}; written: {found or 'no letters'})")
    return PersonaVerdict(ok=not reasons, reasons=tuple(reasons), language=found)
