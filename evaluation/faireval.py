"""FairEval pairwise judging of two simulated runs on the same topic (Mem-PAL §4.4).

Each aspect (requirement, preference) is judged separately with its own prompt: k samples with
method A's dialogue shown as assistant-1 and k with the two dialogues really swapped (Multiple
Evidence + Balanced Position Calibration). The decision averages each method's valid scores within
each order, then the two orders with equal weight, so a failed judge call can never tilt the result
towards one position; a judgment needs a valid sample in both orders (otherwise it is invalid).

**Sampling.** FairEval samples its k evidences at temperature 1 (``FairEval.py``: ``temperature=1, n=k``); at 0
the k samples of an order are one sample asked k times. So k > 1 samples at :data:`FAIREVAL_TEMPERATURE` unless a
temperature is set, and k > 1 at temperature 0 is refused (:func:`sampling_temperature`); k = 1 keeps the judge
role's temperature. With a seed, sample i of order o is drawn with seed ``seed + (o − 1)·k + i`` — each sample its
own draw, the same draw again on an endpoint that honours seeds — and the seed is recorded.

**Prompts** (:mod:`evaluation.faireval_prompts`). :data:`PROMPT_SETS`: ``mempal`` (the default) is the Mem-PAL authors' judge prompt — the Chinese
original they released for Chinese users, the English version of their Appendix for English users — filled as their
``perform_evaluation.py`` fills it; ``compact`` is this project's shorter English wording, kept as a named
alternative (judgments made with it keep their keys and stay readable).

The 2 × k samples are independent calls and go out together as the judge's endpoint allows
(:meth:`backends.llm.client.LLMClient.fan_out`); the judgment is the same as asked one by one.

A judge prompt is never cut to fit the judge's context window: one that does not fit (two long
transcripts, a small window) is not sent, and its samples are recorded as invalid with the reason
(tokens, counter, window), so the judgment says why it has no verdict.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from fractions import Fraction
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backends.llm.client import LLMClient
from backends.llm.context import REQUEST_OVERHEAD, Budget
from backends.llm.errors import ContextOverflow
from backends.prompts import Prompt
from evaluation.faireval_prompts import (  # noqa: F401 — re-exported: the judge's prompt inputs, named here before
    ASPECTS,
    DEFAULT_PROMPT_SET,
    LEGACY_PROMPTS,
    ORDER_WARNING,
    PROMPT_SETS,
    Aspect,
    FairEvalSettingsError,
    PromptSet,
    ground_truth,
    judge_messages,
    mempal_messages,
    mempal_truth,
    prompt_set,
    render_dialogue,
    render_pair,
)
from evaluation.versions import METRIC_VERSIONS
from sim.interventions import Interventions, summarise
from sim.simulator import TopicContext
from sim.types import RunRecord

Decision = Literal["win", "tie", "lose", "invalid"]
Winner = Literal["A", "B", "tie", "none"]
FAIREVAL_TEMPERATURE = 1.0  # FairEval.py samples its k evidences at temperature 1
MIN_JUDGE_ANSWER = 512  # the least answer budget a judge prompt is sent with when the role's budget is its own


class SlotTexts(BaseModel):
    """Free-text analysis per assistant slot, as the judge wrote it."""

    model_config = ConfigDict(populate_by_name=True)
    # bounded so the three analyses and the scores fit a 512-token answer (Chinese included): a judge that rambles
    # is cut by the grammar, never by max_tokens
    assistant_1: str = Field(alias="assistant-1", max_length=400)
    assistant_2: str = Field(alias="assistant-2", max_length=400)
    overall: str = Field(max_length=400)


class SlotScores(BaseModel):
    """Integer scores 1–10 per slot."""

    model_config = ConfigDict(populate_by_name=True)
    assistant_1: int = Field(alias="assistant-1", ge=1, le=10)
    assistant_2: int = Field(alias="assistant-2", ge=1, le=10)


class JudgeOut(BaseModel):
    """The judge's reply: analysis then scores (the paper's output format)."""

    analysis: SlotTexts
    scores: SlotScores


class JudgeSample(BaseModel):
    """One judge call: which order, its scores mapped back to methods, and everything it returned."""

    order: Literal[1, 2]  # 1: method A is assistant-1; 2: swapped
    index: int
    ok: bool
    slot1: int | None = None  # score given to assistant-1
    slot2: int | None = None
    score_a: int | None = None
    score_b: int | None = None
    analysis: dict[str, str] | None = None
    raw: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    reasoning: list[str] = Field(default_factory=list)  # the judge's thinking per attempt, kept apart (never parsed)
    attempts: int = 0
    seed: int | None = None  # the sampling seed sent with it (None: none)


class OrderTexts(BaseModel):
    """The two dialogues exactly as the judge saw them in one order."""

    assistant_1: str
    assistant_2: str


class Judgment(BaseModel):
    """A self-describing pairwise judgment of run A against run B on one topic and aspect."""

    judgment_key: str
    dataset: str
    user_id: str
    sample_id: str
    topic_key: str
    aspect: Aspect
    method_a: str
    method_b: str
    run_a: str
    run_b: str
    k: int
    threshold: float = 0.0
    judge_provider: str = ""
    judge_model: str
    judge_temperature: float | None = None  # the temperature the samples were drawn at
    sampling_temperature: float | None = None  # set for this judging (part of the key); None: the judge role's
    seed: int | None = None  # the base sampling seed (sample i of order o: seed + (o − 1)·k + i); None: not sent
    prompt_set: str = "compact"  # PROMPT_SETS name; judgments made before there was a choice used "compact"
    prompt_name: str
    prompt_version: str
    created_at: float = 0.0
    texts: dict[str, OrderTexts]  # "order1" / "order2"
    samples: list[JudgeSample]
    mean_a: float | None = None
    mean_b: float | None = None
    decision: Decision = "invalid"
    invalid: int = 0
    order1_winner: Winner = "none"
    order2_winner: Winner = "none"
    flipped: bool = False
    slot1_preference: float | None = None  # share of valid samples where assistant-1 scored higher
    decision_version: str = ""  # evaluation.versions "faireval_decision" the decision was computed with
    prompt_tokens: dict[str, int] = Field(default_factory=dict)  # "order1"/"order2" → tokens, by ``token_counter``
    token_counter: str = ""
    context_window: int | None = None
    invalid_reason: str | None = None  # why samples were not even asked (a prompt too long for the window)
    # each arm's interventions ("a", "b"): the simulated user turns of its run asked again, composed from the
    # decision or sent as the user query (sim.interventions); empty in a judgment made before they were recorded
    interventions: dict[str, Interventions] = Field(default_factory=dict)


def judgment_key(run_a: str, run_b: str, aspect: str, k: int, judge_model: str, prompt_version: str,
                 temperature: float | None = None, prompt_name: str | None = None, seed: int | None = None) -> str:
    """The resume key: the same pair, aspect, k, judge model, prompt (name and version), sampling temperature and
    seed is judged once. Parts that are None — and the prompt name of the ``compact`` set, the only one before there
    was a choice — are left out, so judgments made before they existed keep their keys."""
    parts = [run_a, run_b, aspect, str(k), judge_model, prompt_version]
    if temperature is not None:
        parts.append(f"T={temperature:g}")
    if prompt_name is not None and prompt_name not in LEGACY_PROMPTS:
        parts.append(f"P={prompt_name}")
    if seed is not None:
        parts.append(f"S={seed}")
    return "jdg-" + hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def stored_key(j: Judgment) -> str:
    """The key ``j`` was stored under, from its own fields (bundles re-key judgments with it)."""
    return judgment_key(j.run_a, j.run_b, j.aspect, j.k, j.judge_model, j.prompt_version, j.sampling_temperature,
                        j.prompt_name, j.seed)


def sampling_temperature(k: int, temperature: float | None) -> float | None:
    """The temperature a judgment's samples are drawn at: the one set, else :data:`FAIREVAL_TEMPERATURE` for k > 1
    (None for k = 1: the judge role's). k > 1 at temperature 0 is refused: its samples would be one."""
    if temperature is None:
        return FAIREVAL_TEMPERATURE if k > 1 else None
    if k > 1 and temperature == 0:
        raise FairEvalSettingsError(f"k = {k} samples per order at temperature 0 are one sample asked {k} times: "
                                    "sample at a temperature above 0 (FairEval: 1) or judge with k = 1")
    return temperature


def sample_seed(seed: int | None, order: int, index: int, k: int) -> int | None:
    """Sample ``index`` of ``order``'s seed: each sample its own draw, reproducible (None without a seed)."""
    return None if seed is None else seed + (order - 1) * k + index


def planned_key(run_a: str, run_b: str, aspect: str, k: int, judge_model: str, language: str | None, *,
                temperature: float | None = None, seed: int | None = None, prompts: str | None = None) -> str:
    """The key :func:`judge_pair` will store its judgment under with these settings (resume checks use it)."""
    prompt = prompt_set(prompts).prompt(aspect, language)
    return judgment_key(run_a, run_b, aspect, k, judge_model, prompt.version, sampling_temperature(k, temperature),
                        prompt.name, seed)


def ask_judge(llm: LLMClient, prompt: Prompt, messages: list[dict[str, str]], order: Literal[1, 2], index: int,
              aspect: str, temperature: float | None = None, max_tokens: int | None = None,
              seed: int | None = None) -> JudgeSample:
    """One sample (at ``temperature``, else the judge role's; ``max_tokens`` for this prompt, else the role's;
    ``seed`` sent when given); the client retries invalid outputs, a final failure is kept as an invalid sample."""
    extra: dict[str, Any] = {"temperature": temperature} if temperature is not None else {}
    if max_tokens is not None:
        extra["max_tokens"] = max_tokens
    if seed is not None:
        extra["seed"] = seed
    try:
        res = llm.structured("judge", messages, JudgeOut, prompt=prompt, shrink_answer=False,
                             cache_salt=f"faireval:{aspect}:o{order}:s{index}", **extra)
    except ContextOverflow as e:  # a correction turn made it too long: never cut, recorded as invalid
        return JudgeSample(order=order, index=index, ok=False, errors=[str(e)], attempts=0, seed=seed)
    if not res.ok:
        return JudgeSample(order=order, index=index, ok=False, raw=res.raw, errors=res.errors, attempts=res.attempts,
                           reasoning=res.reasoning, seed=seed)
    s1, s2 = res.value.scores.assistant_1, res.value.scores.assistant_2
    a, b = (s1, s2) if order == 1 else (s2, s1)
    return JudgeSample(order=order, index=index, ok=True, slot1=s1, slot2=s2, score_a=a, score_b=b,
                       analysis=res.value.analysis.model_dump(by_alias=True), raw=[res.raw], attempts=res.attempts,
                       reasoning=[res.reasoning] if res.reasoning else [], seed=seed)


def answer_budget(budget: Budget, tokens: int, derived: bool) -> Budget:
    """The budget a judge prompt of ``tokens`` is sent with. A set ``max_tokens`` is kept as it is; the judge role's
    own budget (unset) takes what the window leaves after the prompt, up to that budget and at least
    ``MIN_JUDGE_ANSWER`` — so a long pair of dialogues gets a shorter answer rather than no judgment."""
    if not derived or budget.window is None:
        return budget
    room = budget.window - tokens - REQUEST_OVERHEAD - budget.slack - budget.reserved
    return replace(budget, max_tokens=max(MIN_JUDGE_ANSWER, min(budget.max_tokens, room)))


def too_long(budget: Budget, tokens: int) -> str | None:
    """Why a judge prompt of ``tokens`` cannot be sent, or None when it fits."""
    if budget.limit is None or tokens <= budget.limit:
        return None
    return (f"judge prompt of {tokens:,} tokens ({budget.counter_name}) does not fit the judge's window of "
            f"{budget.window:,} tokens ({budget.window_source}) with max_tokens {budget.max_tokens:,}: judge prompts "
            "are never cut, so it was not sent")


def _winner(samples: list[JudgeSample]) -> Winner:
    valid = [s for s in samples if s.ok]
    if not valid:
        return "none"
    diff = sum((s.score_a or 0) - (s.score_b or 0) for s in valid)  # valid samples carry both scores
    return "A" if diff > 0 else "B" if diff < 0 else "tie"


def order_means(samples: list[JudgeSample]) -> dict[int, tuple[Fraction, Fraction] | None]:
    """Per order (1, 2): the exact means (A, B) of its valid samples, or None when it has none."""
    out: dict[int, tuple[Fraction, Fraction] | None] = {}
    for order in (1, 2):
        valid = [s for s in samples if s.ok and s.order == order]
        out[order] = (Fraction(sum(s.score_a for s in valid), len(valid)),  # type: ignore[misc]  # valid samples carry both scores
                      Fraction(sum(s.score_b for s in valid), len(valid))) if valid else None  # type: ignore[misc]  # valid samples carry both scores
    return out


def decide(samples: list[JudgeSample], threshold: float = 0.0) -> tuple[Decision, float | None, float | None]:
    """(decision, mean A, mean B): each order's valid samples are averaged, then the two orders with equal
    weight (Balanced Position Calibration). Invalid unless both orders have a valid sample; win/lose when
    the mean difference exceeds the threshold, tie otherwise (threshold 0: tie only on exact equality, as
    the paper). The arithmetic is exact, so equal means are a tie, never a rounding win."""
    means = order_means(samples)
    if means[1] is None or means[2] is None:
        return "invalid", None, None
    mean_a = (means[1][0] + means[2][0]) / 2
    mean_b = (means[1][1] + means[2][1]) / 2
    diff = mean_a - mean_b
    decision: Decision = "win" if diff > threshold else "lose" if diff < -threshold else "tie"
    return decision, float(mean_a), float(mean_b)


def apply_decision(j: Judgment, threshold: float) -> Judgment:
    """The judgment with decision, means and diagnostics (re)computed from its samples."""
    decision, mean_a, mean_b = decide(j.samples, threshold)
    o1, o2 = _winner([s for s in j.samples if s.order == 1]), _winner([s for s in j.samples if s.order == 2])
    valid = [s for s in j.samples if s.ok]
    slot1 = sum(s.slot1 > s.slot2 for s in valid) / len(valid) if valid else None  # type: ignore[operator]  # valid samples carry both slots
    return j.model_copy(update={
        "threshold": threshold, "decision": decision, "mean_a": mean_a, "mean_b": mean_b,
        "invalid": len(j.samples) - len(valid), "order1_winner": o1, "order2_winner": o2,
        "flipped": o1 != o2 and "none" not in (o1, o2), "slot1_preference": slot1,
        "decision_version": METRIC_VERSIONS["faireval_decision"]})


def judge_pair(llm: LLMClient, ctx: TopicContext, run_a: RunRecord, run_b: RunRecord, aspect: Aspect, *,
               k: int = 3, threshold: float = 0.0, temperature: float | None = None, seed: int | None = None,
               prompts: str | None = None) -> Judgment:
    """Judge run A against run B on one aspect: k samples in each order, then the decision. ``temperature``: the
    samples' (None: :func:`sampling_temperature` — FairEval's 1 for k > 1, the judge role's for k = 1; k > 1 at 0 is
    refused); ``seed``: each sample's seed is derived from it (None: none sent); ``prompts``: a
    :data:`PROMPT_SETS` name (None: the authors' prompt, in the user's language)."""
    temperature = sampling_temperature(k, temperature)
    chosen = prompt_set(prompts)
    prompt = chosen.prompt(aspect, ctx.user.language)
    text_a, text_b = render_dialogue(run_a, chosen.quoted), render_dialogue(run_b, chosen.quoted)
    budget = llm.budget("judge", structured=JudgeOut)
    derived = llm.config.role("judge").max_tokens is None
    tokens: dict[str, int] = {}
    reasons: list[str] = []
    messages: dict[int, list[dict[str, str]]] = {}
    refused: dict[int, str] = {}
    fitted: dict[int, Any] = {}
    for order, (first, second) in ((1, (text_a, text_b)), (2, (text_b, text_a))):
        messages[order] = chosen.messages(prompt, ctx, aspect, first, second)
        tokens[f"order{order}"] = budget.count_messages(messages[order])
        fitted[order] = answer_budget(budget, tokens[f"order{order}"], derived)
        if reason := too_long(fitted[order], tokens[f"order{order}"]):
            if chosen.name != "compact":  # the authors' prompt is about twice the compact wording's length
                reason += ("; the compact judge prompt is about half as long (pal judge --prompts compact, the "
                           "Evaluate page's Judge prompt), or give the judge a larger window")
            reasons.append(reason)
            refused[order] = reason
    # every sample at once as the judge's endpoint allows, the two orders alternating (with two slots each then holds
    # one order's prompt in its cache for that order's later samples; one at a time: an order's samples one after
    # another, the same prompt again); stored in the order of a one-by-one judgment
    orders: tuple[Literal[1, 2], ...] = (1, 2)
    asks = [(order, i) for order in orders for i in range(k) if order not in refused]
    if llm.width("judge") > 1:
        asks.sort(key=lambda a: (a[1], a[0]))

    def sample(ask: tuple[Literal[1, 2], int]) -> JudgeSample:
        order, index = ask
        return ask_judge(llm, prompt, messages[order], order, index, aspect, temperature,
                         max_tokens=fitted[order].max_tokens if derived else None,
                         seed=sample_seed(seed, order, index, k))

    answered = dict(zip(asks, llm.fan_out("judge", sample, asks)))
    samples = [answered.get((order, i)) or JudgeSample(order=order, index=i, ok=False, errors=[refused[order]],
                                                       seed=sample_seed(seed, order, i, k))
               for order in orders for i in range(k)]
    rc = llm.config.role("judge")
    spec = run_a.spec
    j = Judgment(
        judgment_key=judgment_key(run_a.run_id, run_b.run_id, aspect, k, rc.model, prompt.version, temperature,
                                  prompt.name, seed),
        dataset=spec.dataset, user_id=spec.user_id, sample_id=spec.sample_id, topic_key=spec.topic_key, aspect=aspect,
        method_a=spec.method, method_b=run_b.spec.method, run_a=run_a.run_id, run_b=run_b.run_id, k=k,
        judge_provider=rc.provider, judge_model=rc.model,
        judge_temperature=rc.temperature if temperature is None else temperature, sampling_temperature=temperature,
        seed=seed, prompt_set=chosen.name, prompt_name=prompt.name, prompt_version=prompt.version, created_at=time.time(),
        texts={"order1": OrderTexts(assistant_1=text_a, assistant_2=text_b),
               "order2": OrderTexts(assistant_1=text_b, assistant_2=text_a)},
        samples=samples, prompt_tokens=tokens, token_counter=budget.counter_name, context_window=budget.window,
        invalid_reason=reasons[0] if reasons else None,
        interventions={"a": summarise(run_a.utterances), "b": summarise(run_b.utterances)})
    return apply_decision(j, threshold)
