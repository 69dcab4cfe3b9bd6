"""The User-LLM simulator: the user side of a simulated dialogue, and the turn loop both sides share (the
assistant, :mod:`sim.assistant`, uses ``retrying``, ``streamed``, ``clean``, ``usable`` and the turn budgets).

What the simulator knows depends on the phase (Mem-PAL §4.3): while the assistant is guessing the
need (Topic Inquiry, Requirement Confirmation) it sees the query, the implicit needs with evidence and
the requirement — no preferences; while solutions are discussed (Solution Discussion/Feedback) it sees
the requirement, the requirement type's pos/neg preference and the liked/disliked candidates with
reasons — no implicit needs. Both sides' texts are PII-redacted before they reach a prompt.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from backends.llm.client import LLMClient
from backends.llm.context import Cut
from backends.llm.types import ChatResult, StructuredResult
from backends.prompts import Prompt
from memory.privacy import redact_text
from memory.sentences import whole_sentences
from palset.dataset import Session, SessionTopic, User
from palset.vocab import Act
from sim.decision import GAVE_AWAY, NO_DRAFT, Decided, composed_before, decided_turn
from sim.fit import FittedMessages, fit_messages, render_transcript
from sim.interventions import drafts_of
from sim.persona_check import HiddenNeed, lasting_reasons, speaks_as_user, user_turn_reasons
from sim.prompting import (
    ABOUT_THE_ASSISTANT,
    LANGUAGE,
    cut_at_speaker,
    echo_sources,
    hidden_need,
    load_role_prompt,
    render_messages,
    simulator_messages,
    with_retry_notes,
)
from sim.types import Draft, TurnDecision, Utterance

__all__ = ["ASSISTANT_TURN_TOKENS", "LANGUAGE", "MAX_TRIES", "PARAGRAPH", "SimulationError", "TopicContext",
           "UserSimulator", "clean", "render_transcript", "retrying", "streamed", "turn_tokens", "usable"]

MAX_TRIES = 3
log = logging.getLogger(__name__)
USER_TURN_TOKENS = 96  # about twice the demo data's longest user turn (42 tokens, English or Chinese, estimated):
# more is a model rambling on (the 0.5B's last drafts copied an act's definition to 160 tokens, ~10 s of decoding)
# PAL-Set's assistant turns are 1–3 sentences (≤ 270 characters, about 65 tokens, in the demo data); the 0.5B wrote
# ~500 tokens a turn, almost all of it paragraphs after the first, which clean() drops — decoded for nothing
ASSISTANT_TURN_TOKENS = 128
PARAGRAPH = "\n\n"  # both sides' turns are their first paragraph (clean): decoding stops there


class SimulationError(RuntimeError):
    """A side could not produce a usable utterance after every retry."""


class UserTurn(BaseModel):
    content: str = Field(max_length=400)


class FreeUserTurn(UserTurn):
    end: bool = Field(False, description="true when you are done with this conversation")


_PLACEHOLDER = re.compile(r"^\W*$|^<[^>]*>$|^\.\.\.$|^…$")
_PREFIX = re.compile(r"^\s*(assistant|user|you|me|reply|answer|用户|助手|你|我|回复|回答)\s*[:：]\s*", re.I)


def clean(text: str, name: str = "") -> str:
    """Strip role prefixes (and ``name`` as a speaker label: "Adrian Valenzuela: …", as the transcript labels the
    user's lines) and wrapping quotes a small model adds; keep at most the first paragraph."""
    text = text.strip()
    if name and name.strip():
        text = re.sub(rf"^{re.escape(name.strip())}\s*[:：]\s*", "", text)
    text = _PREFIX.sub("", text).strip().strip('"“”').strip()
    return text.split("\n\n")[0].strip()


def turn_tokens(llm: LLMClient, role: str, cap: int) -> int:
    """A turn's answer budget: ``cap``, or the role's own max_tokens when that is set lower."""
    return min(cap, llm.config.role(role).max_tokens or cap)


def usable(text: str) -> bool:
    return bool(text) and not _PLACEHOLDER.match(text) and len(text) >= 2


def user_name(user: User) -> str:
    """A user's name as the User-LLM plays it (the profile's, else "the user" / "用户")."""
    p = user.profile
    return p.name.strip() if p is not None and p.name.strip() else ("用户" if user.language == "zh" else "the user")


@dataclass
class TopicContext:
    """Everything about the simulated topic, from the dataset."""

    user: User
    session: Session
    topic: SessionTopic
    free_query: str | None = None

    @property
    def language(self) -> str:
        return LANGUAGE.get(self.user.language, "English")

    def name(self) -> str:
        """The user's name as the User-LLM plays it (the profile's, else "the user")."""
        return user_name(self.user)

    def persona(self, zh: bool = False) -> str:
        """The profile in one paragraph (labels in Chinese for a Chinese-worded prompt)."""
        p = self.user.profile
        if p is None:
            return "（无资料）" if zh else "(no profile)"
        if zh:
            return redact_text(f"{p.name}，{p.age}岁，{p.gender}。职业：{p.occupation} 健康：{p.health_status} "
                               f"家庭：{p.family_members} 爱好：{p.hobbies}")
        return redact_text(f"{p.name}, {p.age}, {p.gender}. Occupation: {p.occupation} Health: {p.health_status} "
                           f"Family: {p.family_members} Hobbies: {p.hobbies}")

    def personality(self) -> str:
        p = self.user.profile
        return ", ".join(f"{k} {v}" for k, v in p.personality.as_dict().items()) if p else "unknown"

    def situation(self) -> str:
        sit = self.user.situations.get(self.session.situation_id or "")
        return redact_text(sit.situation) if sit else "(not recorded)"

    def needs_with_evidence(self) -> list[tuple[str, list[str]]]:
        """The topic's implicit needs, each with the evidences the framework file gives it (if any)."""
        needs = self.topic.framework.implicit_needs if self.topic.framework else None
        return [(need, needs[i].evidences if needs and i < len(needs) else [])
                for i, need in enumerate(self.topic.topic.implicit_needs)]

    def preference(self):
        """The pos/neg preference of the topic's requirement type, or None."""
        return self.user.preferences.get(self.topic.requirement_type_id or "")


def sampling_seed(salt: str) -> int:
    """A sampling seed from a call's cache salt (run, turn, side, attempt): endpoints that honour seeds (the local
    server does) then replay a run exactly, and each retry samples afresh."""
    return int(hashlib.sha1(salt.encode()).hexdigest()[:8], 16)


def retrying(what: str, attempt_fn: Callable[[int], str | None]) -> tuple[str, int]:
    """Call ``attempt_fn(n)`` until it returns usable text; an empty or broken turn is never accepted."""
    for n in range(1, MAX_TRIES + 1):
        text = attempt_fn(n)
        if text is not None and usable(text):
            return text, n
    raise SimulationError(f"{what}: no usable utterance after {MAX_TRIES} tries")


class UserSimulator:
    """Role ``user_simulator``: one user utterance in the scheduled act.

    Fixed mode knows the act from the schedule, so the turn is plain text, streamed (``on_token``); free mode asks
    for ``{"content", "end"}`` (the user decides when to stop). Both send the same messages
    (:func:`sim.prompting.simulator_messages`) and store the same utterance."""

    kind = "llm"

    def __init__(self, llm: LLMClient, ctx: TopicContext, free_mode: bool = False, style: str | None = None):
        """``style``: a fragment for the system message (e.g. the ``user_style`` conditioning), or None."""
        self.llm, self.ctx, self.free_mode, self.style = llm, ctx, free_mode, style
        self.prompt: Prompt = load_role_prompt("sim/user_simulator", ctx.user.language)
        self.hidden: HiddenNeed = hidden_need(ctx.topic, ctx.free_query)  # what no turn of this run may copy

    def fitted(self, act: Act, history: list[Utterance]) -> FittedMessages:
        """The messages fitted into the simulator's window (:mod:`sim.fit`: the oldest utterances go first)."""
        def build(_memory: str, kept: list[Utterance], dropped: int) -> list[dict[str, str]]:
            return simulator_messages(self.prompt, self.ctx, act, kept, free_mode=self.free_mode,
                                      fragment=self.style, dropped=dropped)
        budget = self.llm.budget("user_simulator", structured=FreeUserTurn if self.free_mode else None)
        return fit_messages(budget, build, history)

    def messages(self, act: Act, history: list[Utterance]) -> list[dict[str, str]]:
        return self.fitted(act, history).messages

    def say(self, turn_no: int, act: Act, history: list[Utterance], salt: str,
            on_token: Callable[[str], None] | None = None) -> tuple[Utterance, bool]:
        """(utterance, wants_to_end)."""
        started = time.perf_counter()
        fitted = self.fitted(act, history)
        msgs = fitted.messages
        sources = echo_sources(msgs, history)
        clause_sources = [*sources, *self.hidden.texts]  # a decision's own words must not give the need away either
        at_once, shown = self._decided_at_once(turn_no, act, history, msgs, clause_sources, salt, on_token)
        if at_once is not None:
            return self._utterance(turn_no, act, at_once.turn, msgs, fitted.cuts, attempts=1,
                                   fallback=at_once.fallback, started=started,
                                   reasoning=at_once.reasoning, decision=at_once.decision), False
        if shown:  # a decision showed its words but came to nothing: the drafts are not streamed after them
            on_token = None
        rejected: list[tuple[str, tuple[str, ...]]] = []  # drafts that did not speak as the user, and why
        earlier = [u.content for u in history if u.side == "user"]
        ended, reasoning = False, ""

        def attempt_free(n: int) -> str | None:
            nonlocal ended, reasoning
            out = self.llm.structured("user_simulator", with_retry_notes(self.prompt, self.ctx, msgs, rejected),
                                      FreeUserTurn, prompt=self.prompt,
                                      cache_salt=f"{salt}/{n}", seed=sampling_seed(f"{salt}/{n}"), cuts=fitted.cuts,
                                      check=lambda v: None if usable(clean(v.content)) else
                                      "content is empty or a placeholder: write the user's actual words")
            if isinstance(out, StructuredResult):
                ended, reasoning = bool(out.value.end), out.reasoning
                return self._in_persona(self._words(out.value.content), n, sources, earlier, rejected)
            return None

        def attempt_plain(n: int) -> str | None:
            nonlocal reasoning
            text, reasoning = streamed(self.llm, "user_simulator", with_retry_notes(self.prompt, self.ctx, msgs, rejected),
                                        self.prompt, f"{salt}/{n}", fitted.cuts,
                                        on_token if n == 1 else None,
                                        stop_when=self._gone_astray if n < MAX_TRIES else None,
                                        max_tokens=turn_tokens(self.llm, "user_simulator", USER_TURN_TOKENS),
                                        stop=self._stops())
            return (self._in_persona(self._words(text), n, sources, earlier, rejected)
                    if text is not None else None)

        try:
            content, tries = retrying(f"user simulator, turn {turn_no} ({act.value})",
                                       attempt_free if self.free_mode else attempt_plain)
        except SimulationError:
            if history:
                raise
            content, tries = "", MAX_TRIES  # no usable opening at all: the user query is sent (below), not a failure
        fallback, last_draft, decision = "", content, None
        gave_away = self.hidden.given_away(content)
        in_persona = speaks_as_user(content, self.ctx.user.language, sources, self.ctx.name()).ok
        if gave_away or not in_persona:
            if not history:
                fallback = self._opening_fallback(content, gave_away)
                content = redact_text(self.ctx.free_query or self.ctx.topic.topic.user_query)
            elif not self.free_mode and (decided := decided_turn(
                    self.llm, self.prompt, self.ctx, act, history, msgs[0]["content"], clause_sources, salt,
                    seed=sampling_seed(f"{salt}/decision"), why=GAVE_AWAY if in_persona else NO_DRAFT)) is not None:
                log.info("user simulator turn %s composed from a decision (last draft: %.80s)", turn_no, content)
                content, fallback, decision = decided.turn, decided.fallback, decided.decision
                tries += 1
        drafts = drafts_of(rejected, last_draft, (GAVE_AWAY if gave_away else NO_DRAFT) if fallback else "")
        return self._utterance(turn_no, act, content, msgs, fitted.cuts, attempts=tries, fallback=fallback,
                               started=started, reasoning=reasoning, drafts=drafts, decision=decision), ended

    def _utterance(self, turn_no: int, act: Act, content: str, msgs: list[dict[str, str]], cuts: list[Cut], *,
                   attempts: int, fallback: str, started: float, reasoning: str = "", drafts: list[Draft] | None = None,
                   decision: TurnDecision | None = None) -> Utterance:
        """The user's turn with every intervention on the record: its drafts and the decision it was composed from."""
        return Utterance(turn_no=turn_no, side="user", actor="simulator", act=act, content=content,
                         prompt_name=self.prompt.name, prompt_version=self.prompt.version, prompt=render_messages(msgs),
                         cuts=cuts, reasoning=reasoning, attempts=attempts, fallback=fallback,
                         drafts=drafts or [], decision=decision, drafts_kept=True,
                         model=self.llm.config.role("user_simulator").model,
                         latency_ms=(time.perf_counter() - started) * 1000, created_at=time.time())

    def _decided_at_once(self, turn_no: int, act: Act, history: list[Utterance], msgs: list[dict[str, str]],
                         sources: list[str], salt: str,
                         on_token: Callable[[str], None] | None) -> tuple[Decided | None, bool]:
        """(the turn composed from the model's decision without drafting first, when an earlier judging turn of this
        run had to be (:func:`sim.decision.composed_before`; fixed mode only), else None to draft as usual; whether
        ``on_token`` was given words). The decision streams: its fixed words go to ``on_token`` as soon as the
        decision's value is written."""
        before = None if self.free_mode else composed_before(act, history)
        if before is None:
            return None, False
        shown: list[str] = []

        def relay(token: str) -> None:
            shown.append(token)
            on_token(token)  # type: ignore[misc]  # relay is passed only when on_token is set

        decided = decided_turn(self.llm, self.prompt, self.ctx, act, history, msgs[0]["content"], sources, salt,
                               seed=sampling_seed(f"{salt}/decision"),
                               why=f"asked at once, since turn {before.turn_no}'s drafts never spoke as the user",
                               on_token=relay if on_token is not None else None)
        if decided is not None:
            log.info("user simulator turn %s composed from a decision at once (turn %s needed it)", turn_no,
                     before.turn_no)
        return decided, bool(shown)


    def _stops(self) -> list[str]:
        """Where a draft's words end (the server stops decoding there): the first paragraph (``clean`` keeps only it)
        and a line where the model goes on to write the next speaker's (``cut_at_speaker``) — a rambling 0.5B draft
        ran on to the turn's token cap. Four at most, as OpenAI's API allows."""
        if self.ctx.user.language == "zh":
            return [PARAGRAPH, "\n助手", f"\n{self.ctx.name()}：", f"\n{self.ctx.name()}:"]
        return [PARAGRAPH, "\nAssistant:", f"\n{self.ctx.name()}:", "\nThe assistant"]

    def _opening_fallback(self, draft: str, gave_away: bool) -> str:
        """Why the opening is the question on the user's mind as written (the dataset's user query, or the typed
        one) rather than the model's draft: no draft spoke as the user (a small model's opening that greets or
        apologises like an assistant would start every dialogue off-topic), or the last one gave the need away.
        Mem-PAL's opening is a short, vague question on the topic — what the user query is."""
        why = GAVE_AWAY if gave_away else NO_DRAFT
        log.warning("user simulator opening: %s (last: %.80s); the user query is sent", why, draft)
        return f"the user query: {why} (last draft: {draft[:200]!r})"

    def _gone_astray(self, text: str) -> bool:
        """Whether a draft being written already fails the persona rule in a way no later words undo
        (:func:`sim.persona_check.lasting_reasons`: an assistant's offer, narration, prompt talk): the server then
        stops decoding it and it is asked again, instead of being decoded to its end first, so a live page
        shows the next draft sooner (a small model's rejected drafts mostly show one of these). Read up to the last whole word, so a word still being
        written ("user" of "username") does not count, nor the user's name written as a speaker label before its
        colon, nor a first line about the assistant before the next line (:func:`cut_at_speaker` drops it when the
        user's words follow). Not for the last draft, which is kept whatever it is."""
        so_far = _WORD_TAIL.sub("", text)
        if self.ctx.name().startswith(so_far.strip()):  # the name being written as a label ("罗晓岚" before its "：")
            return False
        if "\n" not in so_far.strip() and so_far.lstrip().startswith(ABOUT_THE_ASSISTANT):
            return False  # a first line copying the cue ("The assistant just wrote: …"): the user's words may follow
        return bool(lasting_reasons(self._words(so_far), self.ctx.name()))

    def _words(self, text: str) -> str:
        """The user's words of a reply: role prefixes, the user's name as a speaker label and quotes stripped, cut
        where the model went on to write the assistant's line or the prompt's cue."""
        return clean(cut_at_speaker(text, self.ctx.name()), self.ctx.name())

    def _in_persona(self, text: str, attempt: int, sources: list[str], earlier: list[str],
                    rejected: list[tuple[str, tuple[str, ...]]]) -> str | None:
        """``text``, or None (ask again, telling the model what was wrong) when it does not speak as the user
        (:mod:`sim.persona_check`), says one of the user's ``earlier`` turns again word for word
        (:func:`sim.persona_check.repeats_earlier`) or gives the run's hidden need away, and this is not the last
        attempt — the last one is kept rather than failing."""
        reasons = user_turn_reasons(text, self.ctx.user.language, sources, self.ctx.name(), earlier, self.hidden)
        if not reasons or attempt >= MAX_TRIES or not usable(text):
            return text
        log.info("user simulator turn rejected (%s): %.80s", "; ".join(reasons), text)
        rejected.append((text, reasons))
        return None


_WORD_TAIL = re.compile(r"[A-Za-z0-9_'’-]+$")  # a Latin word that may still be being written


def streamed(llm: LLMClient, role: str, msgs: list[dict[str, str]], prompt: Prompt, salt: str, cuts: list[Cut],
              on_token: Callable[[str], None] | None, stop_when: Callable[[str], bool] | None = None,
              **overrides: Any) -> tuple[str | None, str]:
    """(text, reasoning) of one streamed call; deltas go to ``on_token``. A retry (no ``on_token``) asks once more
    with its own seed. An answer its token cap cut off keeps its whole sentences. ``stop_when`` reads the text so far
    after each delta: when it says so the call is stopped there (the server stops decoding) and that text returned
    as it is, for the caller to reject."""
    final: ChatResult | None = None
    cancel = threading.Event()
    said = ""
    chunks = llm.stream(role, msgs, prompt=prompt, use_cache=True, cuts=cuts, cache_salt=salt, cancel=cancel,
                        seed=sampling_seed(salt), **overrides)
    for chunk in chunks:
        if isinstance(chunk, ChatResult):
            final = chunk
            continue
        said += chunk
        if on_token:
            on_token(chunk)
        if stop_when is not None and not cancel.is_set() and stop_when(said):
            log.info("%s: draft stopped while it streamed: %.80s", role, said)
            cancel.set()
    if final is None:
        return (said if cancel.is_set() else None), ""
    return (whole_sentences(final.text) if final.finish_reason == "length" else final.text), final.reasoning
