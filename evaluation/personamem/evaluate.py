"""PersonaMem-v2 evaluation of a memory method (Jiang et al., arXiv 2512.06688, §1.5 of the reference).

For every evaluable question item the method's memory (built over the history's pseudo-sessions,
see :mod:`evaluation.personamem.loader`) is retrieved with the item's ``user_query`` (purpose
``solution``, latest memory), then:

* **MCQ** — the gold answer and the 3 distractors are shuffled with a per-item seed derived from
  ``seed`` and the item id by SHA-1 (stable across processes, unlike the original evaluator's
  ``hash()``); the role ``assistant`` replies with a bounded schema whose ``answer`` is one of
  ``A``–``D``. Correct when it names the gold letter.
* **Open-ended** — the assistant answers freely (bounded length); the role ``judge`` scores it as the
  released judge does: it sees the **last 5 messages** of the chat history (``context``), the query, the
  ground-truth preference (with what the answer must not use: a forgotten, superseded, sensitive or
  someone else's preference) and the example correct answer — never the wrong options. By default one
  judge call scores 0/1; the paper aggregates **three judges** and the released code scores **0–1**, so
  :class:`Judging` offers ``judges`` independent judge calls (distinct seeds), or one call per judge
  ``models`` (the **mean of the judges is the default when more than one model is given**), combined by
  ``mean`` (correct when the mean is ≥ 0.5) or ``majority`` (more than half of the valid calls ≥ 0.5), on
  the ``binary`` or ``continuous`` scale; the report then adds the mean score.

Accuracy is broken down by preference type, ownership, static/updated and conversation scenario. An
*answer* that stays invalid after the client's corrections is recorded with ``ok=False`` and counts as
wrong (and as invalid in the report); a *judge* that gives no valid verdict is not the method's fault:
the item is left out of the open-ended accuracy and counted as ``judge_failed``. Nothing raises.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backends.llm.client import LLMClient
from backends.llm.context import Cut
from backends.llm.types import StructuredResult
from backends.prompts import Prompt, load_prompt
from evaluation.personamem.loader import QuestionItem
from evaluation.versions import METRIC_VERSIONS
from memory.base import assistant_client
from memory.build import MemoryBuilder
from memory.fit import fit_memory_prompt
from memory.privacy import redact_text
from memory.types import RetrievalTrace

Form = Literal["mcq", "open"]
FORMS: tuple[Form, ...] = ("mcq", "open")
LETTERS = ("A", "B", "C", "D")
NO_MEMORY = "(nothing remembered)"
GROUPS = ("overall", "pref_type", "who", "dynamics", "scenario")
Scale = Literal["binary", "continuous"]
Aggregate = Literal["mean", "majority"]


class MCQOut(BaseModel):
    reason: str = Field(max_length=600, description="one or two sentences: which remembered preference decides it")
    answer: Literal["A", "B", "C", "D"]


class OpenOut(BaseModel):
    answer: str = Field(max_length=1500, description="the reply to the user, at most a short paragraph")


class JudgeOut(BaseModel):
    reason: str = Field(max_length=800)
    score: Literal[0, 1]


class ScoredJudgeOut(BaseModel):
    """The released code's scale: a score from 0.0 to 1.0."""

    reason: str = Field(max_length=800)
    score: float = Field(ge=0.0, le=1.0)


CONTEXT_MESSAGES = 5  # the released judge sees the last 5 messages of the chat history


class Judging(BaseModel):
    """How open-ended answers are judged: one binary judge (default), the paper's three judges, or one call per
    judge model (``models``: served by the judge role's endpoint; with more than one, their mean by default)."""

    model_config = ConfigDict(extra="forbid")
    judges: int = Field(1, ge=1, le=5)
    aggregate: Aggregate = "mean"
    scale: Scale = "binary"
    models: list[str] = Field(default_factory=list, max_length=5)

    @classmethod
    def for_models(cls, models: list[str], **settings: Any) -> Judging:
        """Judging with these judge models: one call each, combined by their mean unless told otherwise."""
        given = {k: v for k, v in settings.items() if v is not None}
        if len(models) > 1:
            given.setdefault("judges", len(models))
            given.setdefault("aggregate", "mean")
        return cls(models=models, **given)

    @property
    def prompt_name(self) -> str:
        return "eval/personamem_judge" if self.scale == "binary" else "eval/personamem_judge_scored"

    def model_of(self, call: int) -> str | None:
        """The judge model of the ``call``-th judge call (None: the judge role's)."""
        return self.models[call % len(self.models)] if self.models else None


def judge_context(messages: list[tuple[str, str]], n: int = CONTEXT_MESSAGES) -> str:
    """The last ``n`` (role, content) messages of the chat history as ``role: content`` lines (PII redacted)."""
    return "\n".join(f"{role}: {redact_text(content)}" for role, content in messages[-n:]) or "(no history)"


def combine(scores: list[float], aggregate: Aggregate) -> tuple[float, bool]:
    """(score, correct) of the valid judge scores: the mean (correct when ≥ 0.5), or the majority verdict
    (1.0 when more than half say ≥ 0.5, else 0.0 — an even split is not a majority)."""
    if aggregate == "majority":
        yes = sum(x >= 0.5 for x in scores)
        return (1.0, True) if yes * 2 > len(scores) else (0.0, False)
    mean = sum(scores) / len(scores)
    return mean, mean >= 0.5


class PMRecord(BaseModel):
    """One item in one form for one method, with everything needed to audit it."""

    item_id: str
    form: Form
    method: str
    pref_type: str
    who: str
    dynamics: str
    scenario: str | None = None
    query: str
    model: str
    prompt_name: str
    prompt_version: str
    ok: bool = False
    correct: bool = False
    raw: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    memory_tokens: int = 0
    memory_cuts: list[Cut] = Field(default_factory=list)  # what was left out to fit the assistant's window
    memory_token_counter: str = ""  # which counter made memory_tokens
    # mcq
    seed: int | None = None
    item_seed: int | None = None
    options: list[str] = Field(default_factory=list)
    option_kinds: list[str] = Field(default_factory=list)  # "gold" | "distractor1".."distractor3"
    gold_letter: str | None = None
    answer: str | None = None
    reason: str | None = None
    # open-ended judging
    judge_model: str | None = None
    judge_prompt_name: str | None = None
    judge_prompt_version: str | None = None
    judge_ok: bool | None = None
    judge_raw: list[str] = Field(default_factory=list)
    judge_reason: str | None = None
    score: float | None = None  # the (combined) judge score
    judge_scores: list[float] = Field(default_factory=list)  # every valid judge call's score
    judge_models: list[str] = Field(default_factory=list)  # the model of each judge call
    judges: int = 1
    judge_aggregate: str = "mean"
    scale: str = "binary"
    metric_version: str = ""  # evaluation.versions "personamem" this record was scored with
    created_at: float = 0.0


def item_seed(seed: int, item_id: str) -> int:
    return int(hashlib.sha1(f"{seed}:{item_id}".encode()).hexdigest()[:8], 16)


def shuffle_options(item: QuestionItem, seed: int) -> tuple[list[str], list[str], str, int]:
    """(option texts in shown order, their kinds, gold letter, item seed) — reproducible from ``seed``."""
    s = item_seed(seed, item.item_id)
    opts = [(item.correct_answer or "", "gold")] + [(t, f"distractor{k}") for k, t in enumerate(item.incorrect_answers, 1)]
    random.Random(s).shuffle(opts)
    kinds = [k for _, k in opts]
    return [t for t, _ in opts], kinds, LETTERS[kinds.index("gold")], s


def rubric(item: QuestionItem) -> tuple[str, str]:
    """(what a good answer uses, what it must avoid) for the open-ended judge."""
    avoid = []
    if item.pref_type == "ask_to_forget":
        use = "Nothing the user asked to forget; a helpful answer that does not rely on the forgotten fact."
        avoid.append(f"the fact the user asked to forget: {item.forgotten}")
    elif item.pref_type == "sensitive_info":
        use = "A helpful answer that refers to the user's private data only through a placeholder or generically."
        avoid.append(f"repeating the sensitive value ({item.sensitive_info})" if item.sensitive_info else
                     "repeating the sensitive personal data the user shared (numbers, addresses, keys)")
    elif item.who == "others":
        use = "A generic answer about the user's own needs: the preference below belongs to someone else."
        avoid.append(f"personalising to another person's preference: {item.preference}")
    else:
        use = f"The user's current preference: {item.preference}"
        if item.updated and item.prev_pref:
            avoid.append(f"the superseded preference: {item.prev_pref}")
    avoid.append("preferences assumed from the user's demographics (stereotypes) that the user never stated")
    return use, "\n".join(f"- {a}" for a in avoid)


class PersonaMemEval:
    """Runs the MCQ and open-ended forms of items against one built memory."""

    def __init__(self, llm: LLMClient, builder: MemoryBuilder | None, method: str, seed: int = 0,
                 judging: Judging | None = None, context: str = "(no history)"):
        self.builder, self.method, self.seed = builder, method, seed
        self.judging = judging or Judging()
        self.context = context  # the chat history's last messages, as the released judge sees them
        self.llm = assistant_client(llm, builder.impl if builder else None)  # PLUM: its own model, latest adapter

    def memory(self, query: str) -> RetrievalTrace | None:
        return None if self.builder is None else self.builder.retrieve(query, "solution")

    def _prompt(self, r: PMRecord, prompt: Prompt, schema: type[BaseModel], trace: RetrievalTrace | None,
                **values: object) -> str:
        """The prompt with the memory fitted into the assistant's window (:mod:`memory.fit`), cuts recorded."""
        text, fitted = fit_memory_prompt(self.llm.budget("assistant", structured=schema),
                                         lambda memory: prompt.render(memory=memory, **values), trace, NO_MEMORY)
        r.memory_tokens, r.memory_cuts = (fitted.tokens, fitted.cuts) if fitted else (0, [])
        r.memory_token_counter = fitted.token_counter if fitted else ""
        return text

    def _record(self, item: QuestionItem, form: Form, prompt_name: str, prompt_version: str) -> PMRecord:
        return PMRecord(item_id=item.item_id, form=form, method=self.method, pref_type=item.pref_type,
                        who=item.ownership, dynamics=item.dynamics, scenario=item.conversation_scenario,
                        query=item.user_query or "", model=self.llm.config.role("assistant").model,
                        prompt_name=prompt_name, prompt_version=prompt_version, created_at=time.time(),
                        metric_version=METRIC_VERSIONS["personamem"])

    def mcq(self, item: QuestionItem, trace: RetrievalTrace | None) -> PMRecord:
        prompt = load_prompt("eval/personamem_mcq")
        r = self._record(item, "mcq", prompt.name, prompt.version)
        r.options, r.option_kinds, r.gold_letter, r.item_seed = shuffle_options(item, self.seed)
        r.seed = self.seed
        options = "\n".join(f"{letter}. {text}" for letter, text in zip(LETTERS, r.options))
        msg = self._prompt(r, prompt, MCQOut, trace, query=item.user_query, options=options)
        res = self.llm.structured("assistant", [{"role": "user", "content": msg}], MCQOut, prompt=prompt,
                                  cache_salt=f"personamem:{self.method}:mcq")
        r.ok, r.raw, r.errors = res.ok, ([res.raw] if res.ok else res.raw), ([] if res.ok else res.errors)
        if res.ok:
            r.answer, r.reason = res.value.answer, res.value.reason
            r.correct = r.answer == r.gold_letter
        return r

    def open(self, item: QuestionItem, trace: RetrievalTrace | None) -> PMRecord:
        prompt = load_prompt("eval/personamem_open")
        r = self._record(item, "open", prompt.name, prompt.version)
        msg = self._prompt(r, prompt, OpenOut, trace, query=item.user_query)
        res = self.llm.structured("assistant", [{"role": "user", "content": msg}], OpenOut, prompt=prompt,
                                  cache_salt=f"personamem:{self.method}:open")
        r.ok, r.raw, r.errors = res.ok, ([res.raw] if res.ok else res.raw), ([] if res.ok else res.errors)
        if res.ok:
            r.answer = res.value.answer
            self._judge(item, r)
        return r

    def _judge(self, item: QuestionItem, r: PMRecord) -> None:
        """``judging.judges`` independent judge calls (own cache salt and seed each), then :func:`combine`."""
        cfg = self.judging
        prompt = load_prompt(cfg.prompt_name)
        schema = JudgeOut if cfg.scale == "binary" else ScoredJudgeOut
        use, avoid = rubric(item)
        msg = prompt.render(context=self.context, query=item.user_query, use=use, avoid=avoid,
                            reference=item.correct_answer, answer=r.answer)
        role_model = self.llm.config.role("judge").model
        r.judge_models = [cfg.model_of(n) or role_model for n in range(cfg.judges)]
        r.judge_model = ", ".join(dict.fromkeys(r.judge_models))
        r.judge_prompt_name, r.judge_prompt_version = prompt.name, prompt.version
        r.judges, r.judge_aggregate, r.scale = cfg.judges, cfg.aggregate, cfg.scale
        reasons, errors = [], []
        for n in range(cfg.judges):
            salt = "personamem:judge" + (f":{n}" if n else "")  # the first call keeps the single judge's cache
            extra: dict[str, Any] = {"seed": item_seed(self.seed + n, item.item_id)} if n else {}
            judge = self.llm
            if (model := cfg.model_of(n)) is not None and model != role_model:  # the role's endpoint, another model
                judge = self.llm.with_provider("judge", self.llm.provider("judge"), model=model)
            res = judge.structured("judge", [{"role": "user", "content": msg}], schema, prompt=prompt,
                                   cache_salt=salt, **extra)
            if isinstance(res, StructuredResult):
                r.judge_raw.append(res.raw)
                verdict: Any = res.value  # a JudgeOut or a ScoredJudgeOut: both have score and reason
                r.judge_scores.append(float(verdict.score))
                reasons.append(verdict.reason)
            else:
                r.judge_raw += res.raw
                errors += res.errors
        r.judge_ok = bool(r.judge_scores)
        if r.judge_ok:
            score, r.correct = combine(r.judge_scores, cfg.aggregate)
            r.score = int(score) if cfg.judges == 1 and cfg.scale == "binary" else score
            r.judge_reason = reasons[0] if len(reasons) == 1 else " | ".join(reasons)
        else:
            r.errors = errors

    def run(self, items: Iterable[QuestionItem], forms: tuple[Form, ...] = FORMS,
            progress: Callable[[int, int, str], None] | None = None) -> list[PMRecord]:
        """Every evaluable item in every form; the memory is searched item by item, then the items' calls go out
        together as the assistant's endpoint allows (:meth:`backends.llm.client.LLMClient.fan_out`). Records in
        item order; ``progress`` after each item (in the order they finish)."""
        todo = [i for i in items if i.evaluable]
        traces = [self.memory(item.user_query or "") for item in todo]
        lock, finished = threading.Lock(), [0]

        def answer(job: tuple[QuestionItem, RetrievalTrace | None]) -> list[PMRecord]:
            item, trace = job
            records = [self.mcq(item, trace) if form == "mcq" else self.open(item, trace) for form in forms]
            if progress:
                with lock:
                    finished[0] += 1
                    progress(finished[0], len(todo), item.item_id)
            return records

        return [r for records in self.llm.fan_out("assistant", answer, list(zip(todo, traces))) for r in records]


def _key(r: PMRecord, group: str) -> str:
    return "all" if group == "overall" else getattr(r, group) or "unknown"


def _scored(rs: list[PMRecord]) -> bool:
    """Whether a cell's open-ended records carry more than a 0/1 verdict (continuous scale or several judges)."""
    return any(r.form == "open" and (r.scale == "continuous" or r.judges > 1) for r in rs)


def judge_failed(r: PMRecord) -> bool:
    """An open-ended answer the judge gave no valid verdict on (not the method's fault)."""
    return r.form == "open" and r.ok and r.judge_ok is False


def accuracy_report(records: Iterable[PMRecord]) -> list[dict]:
    """Rows {form, group, value, n, correct, invalid, judge_failed, accuracy} for overall, pref_type, who,
    static/updated and conversation scenario; open-ended rows judged on the 0–1 scale or by several judges add
    ``mean_score`` (an invalid answer scores 0).

    ``invalid`` counts records whose assistant output stayed invalid; they count as wrong. ``judge_failed``
    counts answers no judge call gave a valid verdict on: they are left out of ``accuracy`` and the mean
    (accuracy = correct / (n − judge_failed); None when every answer's judging failed).
    """
    cells: dict[tuple[str, str, str], list[PMRecord]] = {}
    for r in records:
        for g in GROUPS:
            cells.setdefault((r.form, g, _key(r, g)), []).append(r)
    rows = []
    for (form, group, value), rs in cells.items():
        judged = [r for r in rs if not judge_failed(r)]
        correct = sum(r.correct for r in judged)
        row = {"form": form, "group": group, "value": value, "n": len(rs), "correct": correct,
               "invalid": sum(not r.ok for r in rs), "judge_failed": len(rs) - len(judged),
               "accuracy": correct / len(judged) if judged else None}
        if _scored(rs):
            row["mean_score"] = sum(r.score or 0.0 for r in judged) / len(judged) if judged else None
        rows.append(row)
    order = {f: i for i, f in enumerate(FORMS)}
    return sorted(rows, key=lambda x: (order.get(x["form"], 9), GROUPS.index(x["group"]), x["value"]))


def report_table(rows: list[dict]) -> str:
    lines = []
    for form in FORMS:
        sub = [r for r in rows if r["form"] == form]
        if not sub:
            continue
        scored = any("mean_score" in r for r in sub)
        lines.append("MCQ (4 options)" if form == "mcq" else
                     "Open-ended (judged, mean 0–1 score)" if scored else "Open-ended (judged 0/1)")
        lines.append(f"  {'group':<10} {'value':<32} {'n':>4} {'correct':>8} {'invalid':>8} {'judge✗':>7} {'acc':>7}"
                     + (f" {'score':>6}" if scored else ""))
        for r in sub:
            acc = "n/a" if r["accuracy"] is None else f"{100 * r['accuracy']:.1f}%"
            score = r.get("mean_score")
            lines.append(f"  {r['group']:<10} {str(r['value'])[:32]:<32} {r['n']:>4} {r['correct']:>8} "
                         f"{r['invalid']:>8} {r['judge_failed']:>7} {acc:>7}"
                         + (f" {'n/a' if score is None else format(score, '.3f'):>6}" if scored else ""))
    if any(r["judge_failed"] for r in rows):
        lines.append("judge✗: answers no judge call gave a valid verdict on — left out of acc and score")
    return "\n".join(lines)


def accuracy_by_method(records: Iterable[PMRecord]) -> list[dict]:
    """:func:`accuracy_report` rows per memory method (the Evaluate page's table)."""
    by_method: dict[str, list[PMRecord]] = {}
    for r in records:
        by_method.setdefault(r.method, []).append(r)
    return [{"method": m, **row} for m, rs in sorted(by_method.items()) for row in accuracy_report(rs)]
