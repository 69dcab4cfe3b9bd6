"""PersonaMem-v2 evaluation of a memory method (Jiang et al., arXiv 2512.06688, §1.5 of the reference).

For every evaluable question item the method's memory (built over the history's pseudo-sessions,
see :mod:`evaluation.personamem.loader`) is retrieved with the item's ``user_query`` (purpose
``solution``, latest memory), then:

* **MCQ** — the gold answer and the 3 distractors are shuffled with a per-item seed derived from
  ``seed`` and the item id by SHA-1 (stable across processes, unlike the original evaluator's
  ``hash()``); the role ``assistant`` replies with a bounded schema whose ``answer`` is one of
  ``A``–``D``. Correct when it names the gold letter.
* **Open-ended** — the assistant answers freely (bounded length); the role ``judge`` scores it with
  a rubric: uses the right (current, the user's own) preference, and avoids the forgotten,
  superseded, sensitive or someone else's preference. By default one judge call scores 0/1; the
  paper aggregates **three judges** and the released code scores **0–1**, so :class:`Judging` offers
  ``judges`` independent judge calls (distinct seeds), combined by ``mean`` (correct when the mean is
  ≥ 0.5) or ``majority`` (correct when more than half of the valid calls say ≥ 0.5), on the ``binary``
  or ``continuous`` scale; the report then adds the mean score.

Accuracy is broken down by preference type, ownership, static/updated and conversation scenario.
An output that stays invalid after the client's corrections is recorded with ``ok=False`` and
counts as wrong (and as invalid in the report); it never raises.
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


class Judging(BaseModel):
    """How open-ended answers are judged: one binary judge (default), or the paper's three judges."""

    model_config = ConfigDict(extra="forbid")
    judges: int = Field(1, ge=1, le=5)
    aggregate: Aggregate = "mean"
    scale: Scale = "binary"

    @property
    def prompt_name(self) -> str:
        return "eval/personamem_judge" if self.scale == "binary" else "eval/personamem_judge_scored"


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
                 judging: Judging | None = None):
        self.builder, self.method, self.seed = builder, method, seed
        self.judging = judging or Judging()
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
        wrong = "\n".join(f"- {t}" for t in item.incorrect_answers)
        msg = prompt.render(query=item.user_query, use=use, avoid=avoid, reference=item.correct_answer,
                            wrong=wrong, answer=r.answer)
        r.judge_model = self.llm.config.role("judge").model
        r.judge_prompt_name, r.judge_prompt_version = prompt.name, prompt.version
        r.judges, r.judge_aggregate, r.scale = cfg.judges, cfg.aggregate, cfg.scale
        reasons, errors = [], []
        for n in range(cfg.judges):
            salt = "personamem:judge" + (f":{n}" if n else "")  # the first call keeps the single judge's cache
            extra: dict[str, Any] = {"seed": item_seed(self.seed + n, item.item_id)} if n else {}
            res = self.llm.structured("judge", [{"role": "user", "content": msg}], schema, prompt=prompt,
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


def accuracy_report(records: Iterable[PMRecord]) -> list[dict]:
    """Rows {form, group, value, n, correct, invalid, accuracy} for overall, pref_type, who, static/updated
    and conversation scenario; open-ended rows judged on the 0–1 scale or by several judges add
    ``mean_score`` (an invalid answer or judgment scores 0).

    ``invalid`` counts records whose assistant (or judge) output stayed invalid; they count as wrong.
    """
    cells: dict[tuple[str, str, str], list[PMRecord]] = {}
    for r in records:
        for g in GROUPS:
            cells.setdefault((r.form, g, _key(r, g)), []).append(r)
    rows = []
    for (form, group, value), rs in cells.items():
        correct = sum(r.correct for r in rs)
        invalid = sum((not r.ok) or r.judge_ok is False for r in rs)
        row = {"form": form, "group": group, "value": value, "n": len(rs), "correct": correct,
               "invalid": invalid, "accuracy": correct / len(rs)}
        if _scored(rs):
            row["mean_score"] = sum(r.score or 0.0 for r in rs) / len(rs)
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
        lines.append(f"  {'group':<10} {'value':<32} {'n':>4} {'correct':>8} {'invalid':>8} {'acc':>7}"
                     + (f" {'score':>6}" if scored else ""))
        for r in sub:
            lines.append(f"  {r['group']:<10} {str(r['value'])[:32]:<32} {r['n']:>4} {r['correct']:>8} "
                         f"{r['invalid']:>8} {100 * r['accuracy']:>6.1f}%"
                         + (f" {r.get('mean_score', 0.0):>6.3f}" if scored else ""))
    return "\n".join(lines)


def accuracy_by_method(records: Iterable[PMRecord]) -> list[dict]:
    """:func:`accuracy_report` rows per memory method (the Evaluate page's table)."""
    by_method: dict[str, list[PMRecord]] = {}
    for r in records:
        by_method.setdefault(r.method, []).append(r)
    return [{"method": m, **row} for m, rs in sorted(by_method.items()) for row in accuracy_report(rs)]
