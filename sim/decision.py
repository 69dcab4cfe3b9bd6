"""A judging turn composed from the user's decision, when no draft of it speaks as the user.

Why: in the two acts where the user *judges* what the assistant said — Requirement Confirmation (was the guess one
of the hidden needs?) and Solution Feedback (accept or reject the suggestion?) — the 0.5B model, asked for the
user's reply, wrote the assistant's guess back, the act's definition, or an assistant-style answer in half its
turns, and three tries did not fix it (FIDELITY.md). Asked instead for the *decision* as bounded JSON (which it
produces validly), it decides; the turn is then the decision's fixed words (``prompts/sim/user_decision.md``:
"No, that's not it." / "不对，不是这个。") followed by the model's own short clause when that clause speaks as the
user (:mod:`sim.persona_check`). The utterance's ``fallback`` says so, with the decision, so nobody mistakes it for
a free draft; the quality bench counts these turns apart.

The decision call sends the User-LLM's own system message and the same chat as the draft, so a server's prompt
cache serves all but its last lines. Its JSON is read as it streams (:class:`DecisionStream`): the decision is its
first field, so the turn's fixed words can be shown a few tokens into the answer, before the model's clause is
written (otherwise a turn decided at once would show nothing until the whole call was done).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from backends.llm.client import LLMClient
from backends.llm.errors import ContextOverflow
from backends.llm.types import StructuredResult
from backends.prompts import Prompt, load_prompt, prompt_language
from memory.privacy import redact_text
from palset.vocab import Act
from sim.fit import fit_messages
from sim.persona_check import speaks_as_user, stray_chinese
from sim.prompting import language_name, last_assistant_words, load_role_prompt, transcript_lines
from sim.types import COMPOSED, TurnDecision, Utterance

log = logging.getLogger(__name__)

NO_DRAFT = "no draft spoke as the user"  # why a turn is composed, as its ``fallback`` ends
GAVE_AWAY = "the last draft gave away the need"  # why an opening fell back to the user query or a judging turn was composed
CLAUSE_CHARS = 120  # the schema's bound on the model's own words (12 English words, 20 Chinese characters asked)


class GuessDecision(BaseModel):
    """Requirement Confirmation: did the assistant's guess hit one of the user's hidden needs?"""

    model_config = ConfigDict(extra="ignore")
    guessed: bool
    point: str = Field("", max_length=CLAUSE_CHARS)


class VerdictDecision(BaseModel):
    """Solution Feedback: is the suggestion a kind of solution the user accepts?"""

    model_config = ConfigDict(extra="ignore")
    accept: bool
    why: str = Field("", max_length=CLAUSE_CHARS)


DECIDED: dict[Act, tuple[str, type[BaseModel]]] = {
    Act.REQUIREMENT_CONFIRMATION: ("guess", GuessDecision),
    Act.SOLUTION_FEEDBACK: ("verdict", VerdictDecision),
}
# per judging act: the decision's field, and the prompt's parts holding the fixed words for true and for false
HEADS: dict[Act, tuple[str, str, str]] = {
    Act.REQUIREMENT_CONFIRMATION: ("guessed", "guessed", "missed"),
    Act.SOLUTION_FEEDBACK: ("accept", "accepted", "rejected"),
}


def decision_messages(prompt: Prompt, sim_prompt: Prompt, ctx: Any, act: Act, history: list[Utterance], system: str,
                      dropped: int = 0) -> list[dict[str, str]]:
    """The User-LLM's ``system`` message, then the chat so far (worded by its prompt ``sim_prompt``, as in the
    draft's message) and the decision asked for ``act``."""
    section, _ = DECIDED[act]
    text = prompt.part(section, transcript=transcript_lines(sim_prompt, ctx.name(), history, dropped),
                       reply=redact_text(last_assistant_words(history)), name=ctx.name(), language=language_name(prompt, ctx.user.language))
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


def words_prompt(prompt: Prompt, language: str) -> Prompt:
    """The decision prompt whose fixed words are in the user's ``language``: under the English wording
    (``PAL_PROMPT_WORDING=english``) a Chinese user still says "不对，不是这个。", not "No, that's not it."."""
    if prompt_language(prompt) == language or language not in ("en", "zh"):
        return prompt
    base = prompt.name.removesuffix(".zh")
    return load_prompt(base if language == "en" else f"{base}.{language}")


def head_words(prompt: Prompt, act: Act, yes: bool, language: str) -> str:
    """The fixed words a judging turn of ``act`` starts with for the decision ``yes``, in the user's ``language``."""
    return _head(words_prompt(prompt, language), act, yes)


def _head(worded: Prompt, act: Act, yes: bool) -> str:
    _, if_yes, if_no = HEADS[act]
    return worded.part(if_yes if yes else if_no).strip()


def compose(prompt: Prompt, decision: BaseModel, language: str, sources: list[str], name: str,
            why: str = NO_DRAFT) -> tuple[str, str]:
    """(the turn, what it was composed from, ending with ``why``): the decision's fixed words, then the model's
    clause when it speaks as the user on its own (else the fixed words alone)."""
    text, fallback, _record = composed(prompt, decision, language, sources, name, why)
    return text, fallback


def composed(prompt: Prompt, decision: BaseModel, language: str, sources: list[str], name: str,
             why: str = NO_DRAFT) -> tuple[str, str, TurnDecision]:
    """:func:`compose`, with the decision as the utterance records it (the stance the checks read)."""
    if isinstance(decision, GuessDecision):
        act, said, yes = Act.REQUIREMENT_CONFIRMATION, "guessed", decision.guessed
        clause = "" if yes else decision.point  # a confirmation needs no more words, and must not volunteer needs
    elif isinstance(decision, VerdictDecision):
        act, said, yes, clause = Act.SOLUTION_FEEDBACK, "accept", decision.accept, decision.why
    else:
        raise TypeError(f"not a user decision: {type(decision).__name__}")
    prompt = words_prompt(prompt, language)
    head = _head(prompt, act, yes)
    said = f"{said}: {'yes' if yes else 'no'}"
    clause = " ".join(clause.split()).strip("\"'“”")
    kept = bool(clause) and speaks_as_user(clause, language, sources, name).ok and not stray_chinese(clause, language)
    zh = prompt_language(prompt) == "zh"
    joiner = "" if zh else " "
    if kept and not zh:
        clause = clause[0].upper() + clause[1:]
    text = f"{head}{joiner}{clause}" if kept else head
    words = f"; its words {'kept' if kept else 'left out'}: {clause!r}" if clause else ""
    field: Literal["guessed", "accept"] = "guessed" if act is Act.REQUIREMENT_CONFIRMATION else "accept"
    record = TurnDecision(act=act, field=field, value=yes, clause=clause, clause_kept=kept)
    return text, f"{COMPOSED} ({said}{words}): {why}", record


class DecisionStream:
    """Reads a decision's JSON as it streams and hands the turn's words to ``on_token``: the fixed words as soon as
    the decision's value is out (``"guessed": false`` → "No, that's not it."), the rest of the composed turn (the
    model's clause, when kept) once the answer is parsed. What was shown is a prefix of the turn sent, or the page's
    final redraw (the utterance) corrects it, logged."""

    def __init__(self, prompt: Prompt, act: Act, language: str, on_token: Callable[[str], None]):
        field = HEADS[act][0]
        self.pattern = re.compile(rf'"{field}"\s*:\s*(true|false)')
        self.prompt, self.act, self.language, self.on_token = prompt, act, language, on_token
        self.text, self.shown = "", ""

    def feed(self, delta: str) -> None:
        """One delta of the JSON answer."""
        self.text += delta
        if not self.shown and (m := self.pattern.search(self.text)):
            self.shown = head_words(self.prompt, self.act, m.group(1) == "true", self.language)
            self.on_token(self.shown)

    def finish(self, turn: str) -> None:
        """The composed ``turn``: what of it is not shown yet."""
        if turn.startswith(self.shown):
            if rest := turn[len(self.shown):]:
                self.on_token(rest)
        else:
            log.warning("user simulator decision: %r was shown while it streamed, the turn composed is %r",
                        self.shown, turn)


class Decided(NamedTuple):
    """A judging turn composed from the model's decision."""

    turn: str  # the words sent
    fallback: str  # what they were composed from (the utterance's ``fallback``)
    reasoning: str = ""  # a reasoning model's thinking on the decision
    decision: TurnDecision | None = None  # the decision as the utterance records it


def composed_before(act: Act, history: list[Utterance]) -> Utterance | None:
    """The run's earlier judging turn that had to be composed because none of its drafts spoke as the user, if any.

    Why: a model that could not word one judging turn as the user (the 0.5B: three drafts of ~8 s each, then the
    decision) almost never words the next one (FIDELITY.md); asking for the decision at once makes such a turn one
    call (≈ 3 s on a quiet 2-core machine) instead of four (≈ 22 s), and the transcript says so. Read from the
    history, so a resumed run decides the same way."""
    if act not in DECIDED:
        return None
    return next((u for u in history if u.side == "user" and u.act in DECIDED and u.composed
                 and u.fallback.endswith(NO_DRAFT)), None)


def decided_turn(llm: LLMClient, sim_prompt: Prompt, ctx: Any, act: Act, history: list[Utterance], system: str,
                 sources: list[str], salt: str, seed: int | None = None, why: str = NO_DRAFT,
                 on_token: Callable[[str], None] | None = None) -> Decided | None:
    """(turn, note) for a judging ``act`` from the model's decision; None when the act is not a judging one, no
    valid decision came or the decision cannot fit the window (the caller keeps its last draft). The chat is fitted
    into the window on its own (the oldest utterances go first): the decision's part and its JSON instructions are
    longer than the draft's. ``on_token`` gets the turn's words as the decision streams (:class:`DecisionStream`).
    An endpoint failure raises, as every call of the turn."""
    if act not in DECIDED:
        return None
    prompt = load_role_prompt("sim/user_decision", ctx.user.language)
    _, model = DECIDED[act]
    fitted = fit_messages(llm.budget("user_simulator", structured=model),
                          lambda _memory, kept, dropped: decision_messages(prompt, sim_prompt, ctx, act, kept, system,
                                                                           dropped), history)
    extra: dict[str, Any] = {"seed": seed} if seed is not None else {}
    stream = DecisionStream(prompt, act, ctx.user.language, on_token) if on_token is not None else None
    try:
        out = llm.structured("user_simulator", fitted.messages, model, prompt=prompt, cache_salt=f"{salt}/decision",
                             cuts=fitted.cuts, on_text=stream.feed if stream else None, **extra)
    except ContextOverflow as e:
        log.warning("user simulator decision for %s: it does not fit the window (%s); the last draft is kept",
                    act.value, e)
        return None
    if not isinstance(out, StructuredResult) or not out.ok:
        log.warning("user simulator decision for %s: no valid JSON; the last draft is kept", act.value)
        return None
    turn, fallback, record = composed(prompt, out.value, ctx.user.language, sources, ctx.name(), why)
    decided = Decided(turn, fallback, out.reasoning, record)
    if stream is not None:
        stream.finish(decided.turn)
    return decided
