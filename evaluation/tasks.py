"""PAL-Bench single-turn tasks per memory method on query topics (Mem-PAL §4.1–4.2).

* Requirement Restatement: memory (retrieved with the user query) + query → one sentence; BLEU
  against the gold requirement, and the G-score judge (each of the two implicit needs 1 / 0.5 / 0).
* Solution Proposal: memory (retrieved with the gold requirement) + requirement → one sentence;
  BLEU against each positive solution, max per n.
* Solution Selection: the candidates as S1…Sn in stored order → an analysis of every candidate, then
  exactly two distinct ids (``{analysis, choices}`` in that order, as the reference's
  ``{analysis, selected_solutions}``); +1 per positive, −1 per negative, 0 per neutral pick.

A failed prediction (invalid after the client's retries) scores 0 on every metric and is counted. A
failed G-score *judge* call is not the method's fault: it has no score (``g_score`` None,
``g_ok`` False), leaves the G-score mean and is counted in its own column.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field, create_model, field_validator, model_validator

from backends.llm.client import LLMClient
from backends.llm.context import Cut
from backends.prompts import Prompt, load_prompt
from evaluation.bleu import bleu, bleu_max
from memory.base import assistant_client
from memory.build import MemoryBuilder
from memory.fit import fit_memory_prompt
from memory.types import RetrievalTrace
from sim.simulator import LANGUAGE, TopicContext

Task = Literal["restatement", "proposal", "selection"]
TASKS: tuple[Task, ...] = ("restatement", "proposal", "selection")
G_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0)
FEEDBACK_POINTS = {"pos": 1, "neg": -1, "neu": 0}
NO_MEMORY = "(nothing remembered)"


class Restatement(BaseModel):
    requirement: str = Field(max_length=600, description="one sentence: what the user actually needs")


class Proposal(BaseModel):
    solution: str = Field(max_length=600, description="one sentence: the proposed solution")


class GScoreOut(BaseModel):
    """The G-score judge's reply: analysis, then the summed match score."""

    analysis: str = Field(max_length=2000)
    score: float = Field(ge=0, le=2, json_schema_extra={"enum": list(G_VALUES)})

    @field_validator("score")
    @classmethod
    def _half_steps(cls, v: float) -> float:
        if v not in G_VALUES:
            raise ValueError("score must be one of 0, 0.5, 1, 1.5, 2")
        return v


class SelectionBase(BaseModel):
    """The analysis of every candidate, then two distinct candidate ids (the id enum is set per topic by
    :func:`selection_model`); the field order makes the model reason before it chooses."""

    analysis: str = Field(max_length=3000, description="for each candidate: does it fit this user, and why")

    @model_validator(mode="after")
    def _distinct(self):
        if len(set(self.choices)) != len(self.choices):
            raise ValueError("choose two DIFFERENT candidate ids")
        return self


def selection_model(n: int) -> type[SelectionBase]:
    """A schema allowing exactly two of the ids S1…Sn (enum-bounded)."""
    ids = tuple(f"S{i}" for i in range(1, n + 1))
    return create_model("Selection", __base__=SelectionBase,
                        choices=(list[Literal[ids]], Field(min_length=2, max_length=2)))  # type: ignore[valid-type]  # the candidate ids are known only at run time


def selection_score(picks: list[str], feedbacks: list[str]) -> int:
    """Σ over the picked ids S<i> of +1 (pos), −1 (neg), 0 (neu) — in [−2, 2]."""
    if len(set(picks)) != len(picks):
        raise ValueError("duplicate candidate ids")
    return sum(FEEDBACK_POINTS[feedbacks[int(p[1:]) - 1]] for p in picks)


def g_report(scores: list[float]) -> float:
    """Mean G-score × 50 → [0, 100]."""
    return 50.0 * sum(scores) / len(scores) if scores else 0.0


def s_report(scores: list[int]) -> float:
    """Mean selection score × 50 → [−100, 100]."""
    return 50.0 * sum(scores) / len(scores) if scores else 0.0


class TaskResult(BaseModel):
    """One task on one topic for one method, with everything needed to audit it."""

    result_key: str
    dataset: str
    user_id: str
    sample_id: str
    topic_key: str
    method: str
    task: Task
    model: str
    prompt_name: str
    prompt_version: str
    ok: bool
    prediction: str | None = None
    raw: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    memory_tokens: int = 0
    memory_cuts: list[Cut] = Field(default_factory=list)  # what was left out to fit the assistant's window
    memory_token_counter: str = ""  # which counter made memory_tokens
    bleu: dict[int, float] | None = None
    g_score: float | None = None
    g_ok: bool | None = None
    g_raw: list[str] = Field(default_factory=list)
    g_analysis: str | None = None
    judge_model: str | None = None
    g_prompt_version: str | None = None
    picks: list[str] = Field(default_factory=list)
    analysis: str | None = None  # selection: the model's analysis of the candidates before choosing
    s_score: int | None = None
    created_at: float = 0.0


def result_key(dataset: str, ctx: TopicContext, method: str, task: str, model: str, prompt_version: str) -> str:
    return result_key_of(dataset, ctx.user.uid, ctx.session.sample_id, ctx.topic.key, method, task, model,
                         prompt_version)


def result_key_of(dataset: str, user_id: str, sample_id: str, topic_key: str, method: str, task: str, model: str,
                  prompt_version: str) -> str:
    """The resume key of a single-turn result from its stored columns (a bundle re-keys results with it)."""
    raw = "|".join([dataset, user_id, sample_id, topic_key, method, task, model, prompt_version])
    return "res-" + hashlib.sha1(raw.encode()).hexdigest()[:16]


def memory_trace(builder: MemoryBuilder | None, query: str, purpose: str, ctx: TopicContext) -> RetrievalTrace | None:
    """What the method retrieves for ``query`` as of the topic's session; None without memory."""
    if builder is None:
        return None
    return builder.retrieve(query, purpose, ctx.session)  # type: ignore[arg-type]  # purpose is one of the two Purpose values


class TopicTasks:
    """Runs the tasks of one topic for one method (role ``assistant`` answers, role ``judge`` grades)."""

    def __init__(self, llm: LLMClient, ctx: TopicContext, method: str, builder: MemoryBuilder | None, dataset: str):
        self.ctx, self.method, self.builder, self.dataset = ctx, method, builder, dataset
        self.llm = assistant_client(llm, builder.impl if builder else None, ctx.session)  # PLUM: its own model
        self.language = LANGUAGE.get(ctx.user.language, "English")

    def _base(self, task: Task, prompt: Prompt) -> TaskResult:
        model = self.llm.config.role("assistant").model
        return TaskResult(result_key=result_key(self.dataset, self.ctx, self.method, task, model, prompt.version),
                          dataset=self.dataset, user_id=self.ctx.user.uid, sample_id=self.ctx.session.sample_id,
                          topic_key=self.ctx.topic.key, method=self.method, task=task, model=model,
                          prompt_name=prompt.name, prompt_version=prompt.version, ok=False, created_at=time.time())

    def _ask(self, r: TaskResult, prompt: Prompt, schema: type[BaseModel], trace: RetrievalTrace | None,
             **values: object):
        """One answer; the memory is fitted into the assistant's window (:mod:`memory.fit`), its cuts recorded."""
        _text, fitted = fit_memory_prompt(self.llm.budget("assistant", structured=schema),
                                         lambda memory: prompt.render(memory=memory, **values), trace, NO_MEMORY)
        r.memory_tokens, r.memory_cuts = (fitted.tokens, fitted.cuts) if fitted else (0, [])
        r.memory_token_counter = fitted.token_counter if fitted else ""
        # the same text as messages: the prompt's system part (the role) first, shared by every topic's call
        messages = prompt.messages(memory=(fitted.context if fitted else "") or NO_MEMORY, **values)
        res = self.llm.structured("assistant", messages, schema,
                                  prompt=prompt, cache_salt=f"bench:{self.method}:{r.task}", cuts=r.memory_cuts)
        r.raw, r.ok = ([res.raw], True) if res.ok else (res.raw, False)
        r.errors = [] if res.ok else res.errors
        return res.value if res.ok else None

    def restatement(self) -> TaskResult:
        prompt = load_prompt("eval/requirement_restatement")
        r = self._base("restatement", prompt)
        t = self.ctx.topic.topic
        trace = memory_trace(self.builder, t.user_query, "requirement", self.ctx)
        out = self._ask(r, prompt, Restatement, trace, query=t.user_query, language=self.language)
        r.prediction = out.requirement if out else None
        r.bleu = bleu(t.requirement, r.prediction or "")
        self._g_score(r)
        return r

    def _g_score(self, r: TaskResult) -> None:
        """Grade the restatement against the two implicit needs. A failed prediction scores 0 (the method
        failed); a failed judge call leaves ``g_score`` None with ``g_ok`` False (no score, not a zero)."""
        t = self.ctx.topic.topic
        r.g_score, r.g_ok = 0.0, None
        if not r.prediction:
            return
        prompt = load_prompt("eval/gscore")
        needs = "\n".join(f"- {n}" for n in t.implicit_needs)
        messages = prompt.messages(query=t.user_query, requirement=t.requirement, needs=needs, prediction=r.prediction)
        res = self.llm.structured("judge", messages, GScoreOut, prompt=prompt,
                                  cache_salt="bench:gscore")
        r.judge_model, r.g_prompt_version = self.llm.config.role("judge").model, prompt.version
        r.g_ok, r.g_raw = res.ok, ([res.raw] if res.ok else res.raw)
        if res.ok:
            r.g_score, r.g_analysis = res.value.score, res.value.analysis
        else:
            r.g_score = None

    def proposal(self) -> TaskResult:
        prompt = load_prompt("eval/solution_proposal")
        r = self._base("proposal", prompt)
        t = self.ctx.topic.topic
        trace = memory_trace(self.builder, t.requirement, "solution", self.ctx)
        out = self._ask(r, prompt, Proposal, trace, requirement=t.requirement, language=self.language)
        r.prediction = out.solution if out else None
        r.bleu = bleu_max(t.solution.pos, r.prediction or "")
        return r

    def selection(self) -> TaskResult:
        prompt = load_prompt("eval/solution_selection")
        r = self._base("selection", prompt)
        t = self.ctx.topic.topic
        trace = memory_trace(self.builder, t.requirement, "solution", self.ctx)
        cands = "\n".join(f'"S{i}": {c.solution}' for i, c in enumerate(t.candidate_solutions, 1))
        out = self._ask(r, prompt, selection_model(len(t.candidate_solutions)), trace,
                        requirement=t.requirement, candidates=cands, count=len(t.candidate_solutions))
        r.picks = list(out.choices) if out else []
        r.analysis = out.analysis if out else None
        r.prediction = ",".join(r.picks) or None
        r.s_score = selection_score(r.picks, [c.feedback for c in t.candidate_solutions]) if out else 0
        return r

    def run(self, tasks: tuple[Task, ...] = TASKS, known: Callable[[Task, str], TaskResult | None] | None = None
            ) -> list[TaskResult]:
        """Each requested task, or its stored result when ``known(task, key)`` has one (resume)."""
        results = []
        for task in tasks:
            prompt = load_prompt({"restatement": "eval/requirement_restatement", "proposal": "eval/solution_proposal",
                                  "selection": "eval/solution_selection"}[task])
            stored = known(task, self._base(task, prompt).result_key) if known else None
            results.append(stored or getattr(self, task)())
        return results
