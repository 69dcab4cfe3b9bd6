"""The two sides of a simulated dialogue: the User-LLM and the memory-equipped assistant.

What the simulator knows depends on the phase (Mem-PAL §4.3): while the assistant is guessing the
need (Topic Inquiry, Requirement Confirmation) it sees the query, the implicit needs with evidence and
the requirement — no preferences; while solutions are discussed (Solution Discussion/Feedback) it sees
the requirement, the requirement type's pos/neg preference and the liked/disliked candidates with
reasons — no implicit needs. Both sides' texts are PII-redacted before they reach a prompt.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from pydantic import BaseModel, Field

from backends.llm.client import LLMClient
from backends.llm.context import Cut
from backends.llm.types import ChatResult, StructuredResult
from backends.prompts import Prompt, load_prompt
from memory.base import assistant_client
from memory.build import MemoryBuilder
from memory.privacy import redact_text
from memory.types import RetrievalTrace
from palset.dataset import Session, SessionTopic, User
from palset.vocab import Act
from sim.acts import DEFINITIONS, PURPOSE, REQUIREMENT_PHASE
from sim.fit import Fitted, fit_prompt, render_transcript
from sim.style import render_messages, with_fragment
from sim.types import Utterance

__all__ = ["Assistant", "SimulationError", "TopicContext", "UserSimulator", "render_transcript"]

LANGUAGE = {"en": "English", "zh": "Chinese (简体中文)"}
MAX_TRIES = 3


class SimulationError(RuntimeError):
    """A side could not produce a usable utterance after every retry."""


class UserTurn(BaseModel):
    content: str = Field(max_length=400)


class FreeUserTurn(UserTurn):
    end: bool = Field(False, description="true when you are done with this conversation")


class QueryOut(BaseModel):
    query: str = Field(max_length=300)


_PLACEHOLDER = re.compile(r"^\W*$|^<[^>]*>$|^\.\.\.$|^…$")
_PREFIX = re.compile(r"^\s*(assistant|user|用户|助手)\s*[:：]\s*", re.I)


def clean(text: str) -> str:
    """Strip role prefixes and wrapping quotes a small model adds; keep at most the first paragraph."""
    text = _PREFIX.sub("", text.strip()).strip().strip('"“”').strip()
    return text.split("\n\n")[0].strip()


def usable(text: str) -> bool:
    return bool(text) and not _PLACEHOLDER.match(text) and len(text) >= 2


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

    def persona(self) -> str:
        p = self.user.profile
        if p is None:
            return "(no profile)"
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

    def liked_and_disliked(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(solution, reason) pairs the user likes and dislikes; reasons only where the dataset has them."""
        t, sp = self.topic.topic, self.topic.solution_preference
        if sp:
            return ([(r.solution, r.feedback_reason) for r in sp.pos_list],
                    [(r.solution, r.feedback_reason) for r in sp.neg_list])
        return [(s, "") for s in t.solution.pos], [(s, "") for s in t.solution.neg]

    def knowledge(self, act: Act) -> str:
        t = self.topic.topic
        if act in REQUIREMENT_PHASE:
            lines = [f"Your opening question (paraphrase it lightly): {self.free_query or t.user_query}",
                     "Your hidden needs (never volunteer them; confirm or correct only what the assistant guesses):"]
            for i, (need, ev) in enumerate(self.needs_with_evidence()):
                lines.append(f"{i + 1}. {need}" + (f" (because: {'; '.join(ev)})" if ev else ""))
            lines.append(f"What you really need overall: {t.requirement}")
            return redact_text("\n".join(lines))
        lines = [f"What you need: {t.requirement}"]
        if pref := self.preference():
            lines += [f"Kinds of solutions you accept: {pref.preference.pos}",
                      f"Kinds of solutions you reject: {pref.preference.neg}"]
        liked, disliked = self.liked_and_disliked()
        lines.append("Solutions you would like: " + "; ".join(f"{s} ({r})" if r else s for s, r in liked))
        lines.append("Solutions you would dislike: " + "; ".join(f"{s} ({r})" if r else s for s, r in disliked))
        return redact_text("\n".join(lines))


def sampling_seed(salt: str) -> int:
    """A sampling seed from a call's cache salt (run, turn, side, attempt): endpoints that honour seeds (the local
    server does) then replay a run exactly, and each retry samples afresh."""
    return int(hashlib.sha1(salt.encode()).hexdigest()[:8], 16)


def _retrying(what: str, attempt_fn: Callable[[int], str | None]) -> tuple[str, int]:
    """Call ``attempt_fn(n)`` until it returns usable text; an empty or broken turn is never accepted."""
    for n in range(1, MAX_TRIES + 1):
        text = attempt_fn(n)
        if text is not None and usable(text):
            return text, n
    raise SimulationError(f"{what}: no usable utterance after {MAX_TRIES} tries")


class UserSimulator:
    """Role ``user_simulator``: one user utterance in the scheduled act."""

    kind = "llm"

    def __init__(self, llm: LLMClient, ctx: TopicContext, free_mode: bool = False, style: str | None = None):
        """``style``: the ``user_style`` fragment (:mod:`sim.style`) added to every turn's messages, or None."""
        self.llm, self.ctx, self.free_mode, self.style = llm, ctx, free_mode, style
        self.prompt: Prompt = load_prompt("sim/user_simulator")

    def fitted(self, act: Act, history: list[Utterance]) -> Fitted:
        """The prompt fitted into the simulator's window (:mod:`sim.fit`: the oldest utterances go first)."""
        def render(_memory: str, dialogue: str) -> str:
            return self.prompt.render(
                language=self.ctx.language, persona=self.ctx.persona(), personality=self.ctx.personality(),
                situation=self.ctx.situation(), knowledge=self.ctx.knowledge(act), dialogue=dialogue,
                act=act.value, definition=DEFINITIONS[act],
                ending=" Set end to true when your need is settled and you want to stop." if self.free_mode else "")
        model = FreeUserTurn if self.free_mode else UserTurn
        budget = self.llm.budget("user_simulator", structured=model)
        if self.style:  # the fragment travels in the same request: the dialogue gets what it leaves
            budget = replace(budget, reserved=budget.reserved + budget.count_messages(with_fragment([], self.style)))
        return fit_prompt(budget, render, history)

    def messages(self, act: Act, history: list[Utterance]) -> list[dict[str, str]]:
        msgs = [{"role": "user", "content": self.fitted(act, history).text}]
        return with_fragment(msgs, self.style) if self.style else msgs

    def say(self, turn_no: int, act: Act, history: list[Utterance], salt: str) -> tuple[Utterance, bool]:
        """(utterance, wants_to_end)."""
        fitted = self.fitted(act, history)
        msgs = [{"role": "user", "content": fitted.text}]
        if self.style:
            msgs = with_fragment(msgs, self.style)
        model = FreeUserTurn if self.free_mode else UserTurn
        ended, reasoning = False, ""
        started = time.perf_counter()

        def attempt(n: int) -> str | None:
            nonlocal ended, reasoning
            out = self.llm.structured("user_simulator", msgs, model, prompt=self.prompt, cache_salt=f"{salt}/{n}",
                                      seed=sampling_seed(f"{salt}/{n}"),
                                      check=lambda v: None if usable(clean(v.content)) else
                                      "content is empty or a placeholder: write the user's actual words")
            if isinstance(out, StructuredResult):
                ended, reasoning = bool(getattr(out.value, "end", False)), out.reasoning
                return clean(out.value.content)
            return None

        content, tries = _retrying(f"user simulator, turn {turn_no} ({act.value})", attempt)
        return Utterance(turn_no=turn_no, side="user", actor="simulator", act=act, content=content,
                         prompt_name=self.prompt.name, prompt_version=self.prompt.version, prompt=render_messages(msgs),
                         cuts=fitted.cuts, reasoning=reasoning, attempts=tries,
                         model=self.llm.config.role("user_simulator").model,
                         latency_ms=(time.perf_counter() - started) * 1000, created_at=time.time()), ended


class Assistant:
    """Role ``assistant``: summarise the need into a retrieval query, retrieve from memory, answer in the act."""

    def __init__(self, llm: LLMClient, ctx: TopicContext, builder: MemoryBuilder | None, method_label: str):
        self.ctx, self.builder, self.method_label = ctx, builder, method_label
        # a method with its own model (PLUM) answers the assistant role itself
        self.llm = assistant_client(llm, builder.impl if builder else None, ctx.session)
        self.prompt = load_prompt("sim/assistant")
        self.summary_prompt = load_prompt("sim/query_summary")

    def _query(self, history: list[Utterance], salt: str) -> str:
        if self.builder is None or not getattr(self.builder.impl, "uses_query", True):
            return ""
        fitted = fit_prompt(self.llm.budget("assistant", structured=QueryOut),
                            lambda _m, dialogue: self.summary_prompt.render(dialogue=dialogue, language=self.ctx.language),
                            history)
        msgs = [{"role": "user", "content": fitted.text}]
        out = self.llm.structured("assistant", msgs, QueryOut, prompt=self.summary_prompt, cache_salt=salt)
        if isinstance(out, StructuredResult) and out.value.query.strip():
            return out.value.query.strip()
        return next((u.content for u in reversed(history) if u.side == "user"), "")

    def say(self, turn_no: int, act: Act, history: list[Utterance], salt: str,
            on_token: Callable[[str], None] | None = None) -> Utterance:
        started = time.perf_counter()
        query = self._query(history, salt)
        trace = None
        if self.builder is not None:
            trace = self.builder.retrieve(query or self.ctx.topic.topic.user_query, PURPOSE[act], self.ctx.session)

        def render(memory: str, dialogue: str) -> str:
            return self.prompt.render(memory_note=f"Memory method: {self.method_label}.", memory=memory,
                                      dialogue=dialogue, act=act.value, definition=DEFINITIONS[act],
                                      language=self.ctx.language)

        fitted = fit_prompt(self.llm.budget("assistant"), render, history, trace, memory_of=self._memory_text)
        msgs = [{"role": "user", "content": fitted.text}]
        reasoning = ""

        def attempt(n: int) -> str | None:
            nonlocal reasoning
            final: ChatResult | None = None
            for chunk in self.llm.stream("assistant", msgs, prompt=self.prompt, use_cache=True, cuts=fitted.all_cuts,
                                         cache_salt=f"{salt}/{n}", seed=sampling_seed(f"{salt}/{n}")) \
                    if n == 1 else self._plain(msgs, f"{salt}/{n}", fitted.all_cuts):
                if isinstance(chunk, ChatResult):
                    final = chunk
                elif on_token:
                    on_token(chunk)
            reasoning = final.reasoning if final else ""
            return clean(final.text) if final else None

        content, tries = _retrying(f"assistant, turn {turn_no} ({act.value})", attempt)
        return Utterance(turn_no=turn_no, side="assistant", actor="assistant", act=act, content=content,
                         prompt_name=self.prompt.name, prompt_version=self.prompt.version, prompt=msgs[0]["content"],
                         retrieval_query=query or None, trace=fitted.trace.summary() if fitted.trace else None,
                         cuts=fitted.cuts, reasoning=reasoning, attempts=tries,
                         model=self.llm.config.role("assistant").model,
                         latency_ms=(time.perf_counter() - started) * 1000, created_at=time.time())

    def _memory_text(self, trace: RetrievalTrace | None) -> str:
        if self.builder is None:
            return "(nothing: this assistant has no memory of the user)"
        return (trace.context if trace else "") or "(nothing relevant)"

    def _plain(self, msgs: list[dict[str, str]], salt: str, cuts: list[Cut]):
        result = self.llm.chat("assistant", msgs, prompt=self.prompt, cache_salt=salt, seed=sampling_seed(salt),
                               cuts=cuts)
        yield result
