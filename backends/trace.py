"""A run, build or judgment as a trace: a tree of spans whose leaves are its recorded LLM calls.

The run store keeps each call flat (``llm_calls``: the run it belongs to, role, model, latency, prompt / cached /
output tokens, transport attempts, error) and stamps it when it ends. A domain knows the steps its work went through
(a simulation's turns, a build's stages, a judgment's orders) and when each was stored; :func:`assemble` files every
call under the first step, of the roles that step names, stored after the call ended — the calls that made it. A
call no step claims (a step still running, a role no step names) stays under the root, so nothing recorded is
hidden. The tree is plain records (pages render it, :mod:`backends.trace_otlp` sends it as OpenTelemetry spans).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SpanKind = Literal["simulation", "build", "judgment", "run", "turn", "side", "stage", "order", "sample", "call"]
Scalar = str | int | float | bool | None
CostFn = Callable[[str, int, int], "float | None"]  # (model, tokens in, tokens out) → USD, None where unpriced
SLACK_S = 0.05  # clock slack: a call accounted this much after its step was stored is still the step's own


class CallSpan(BaseModel):
    """One recorded LLM call as a leaf of the tree (no texts: the run store keeps none)."""

    model_config = ConfigDict(extra="forbid")
    call_id: int
    role: str
    provider: str
    model: str
    prompt_name: str | None = None
    prompt_version: str | None = None
    start: float  # epoch seconds: its end less its latency
    end: float
    latency_ms: float = 0.0
    tokens_in: int = 0
    tokens_cached: int | None = None  # of tokens_in, served from the endpoint's prompt cache (None: not said)
    tokens_out: int = 0
    cost_usd: float | None = None  # None: the model has no price
    attempts: int = 1  # transport attempts (timeouts, 429s, broken answers retried by the client)
    cache_hit: bool = False  # answered from the response cache, never sent
    structured_ok: bool | None = None
    error: str | None = None


class Span(BaseModel):
    """A step of the work (or the work itself): its calls and sub-steps, and why it was asked again, if it was."""

    model_config = ConfigDict(extra="forbid")
    span_id: str
    kind: SpanKind
    name: str
    start: float = 0.0
    end: float = 0.0
    attrs: dict[str, Scalar] = Field(default_factory=dict)
    retry_reasons: list[str] = Field(default_factory=list)  # the rules that sent a draft back, in order
    children: list[Span] = Field(default_factory=list)
    calls: list[CallSpan] = Field(default_factory=list)

    def all_calls(self) -> list[CallSpan]:
        return [*self.calls, *(c for child in self.children for c in child.all_calls())]

    def walk(self) -> Iterable[tuple[int, Span]]:
        """Every span with its depth, parents first."""
        stack: list[tuple[int, Span]] = [(0, self)]
        while stack:
            depth, span = stack.pop()
            yield depth, span
            stack.extend((depth + 1, c) for c in reversed(span.children))

    @property
    def totals(self) -> TraceTotals:
        return TraceTotals.of(self.all_calls())


class TraceTotals(BaseModel):
    """Sums over a set of calls; ``cost_usd`` None when any call is unpriced (never a silent $0)."""

    calls: int = 0
    errors: int = 0
    retried: int = 0  # calls that took more than one transport attempt
    tokens_in: int = 0
    tokens_cached: int = 0
    tokens_reported: int = 0  # prompt tokens of the calls whose endpoint said what its cache served
    tokens_out: int = 0
    llm_s: float = 0.0
    cost_usd: float | None = 0.0

    @property
    def cached_share(self) -> float | None:
        return self.tokens_cached / self.tokens_reported if self.tokens_reported else None

    @classmethod
    def of(cls, calls: Sequence[CallSpan]) -> TraceTotals:
        cost: float | None = 0.0
        for c in calls:
            cost = None if cost is None or c.cost_usd is None else cost + c.cost_usd
        return cls(calls=len(calls), errors=sum(c.error is not None for c in calls),
                   retried=sum(c.attempts > 1 for c in calls), tokens_in=sum(c.tokens_in for c in calls),
                   tokens_cached=sum(c.tokens_cached or 0 for c in calls),
                   tokens_reported=sum(c.tokens_in for c in calls if c.tokens_cached is not None),
                   tokens_out=sum(c.tokens_out for c in calls), llm_s=sum(c.latency_ms for c in calls) / 1000,
                   cost_usd=cost)


class Step(BaseModel):
    """A step a domain knows its work went through, stored at ``end``; ``roles`` the call roles it is made by
    (empty: any). Sub-steps (a turn's two sides) claim calls before their parent does."""

    model_config = ConfigDict(extra="forbid")
    key: str
    kind: SpanKind
    name: str
    end: float
    roles: frozenset[str] = frozenset()
    attrs: dict[str, Scalar] = Field(default_factory=dict)
    retry_reasons: list[str] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    claims: bool = True  # False: a step known without its time (a judge's sample in a fan-out) files no calls


def call_span(row: Mapping[str, object], cost: CostFn | None = None) -> CallSpan:
    """A leaf from one ``llm_calls`` row (as :meth:`backends.store.runstore.RunStore.calls_of` returns it)."""
    end, latency = float(row["ts"]), float(row.get("latency_ms") or 0.0)  # type: ignore[arg-type]  # sqlite values
    tin, tout, model = int(row.get("tokens_in") or 0), int(row.get("tokens_out") or 0), str(row["model"])  # type: ignore[call-overload]  # sqlite values
    cached = row.get("tokens_cached")
    ok = row.get("structured_ok")
    return CallSpan(call_id=int(row["id"]), role=str(row["role"]), provider=str(row["provider"]), model=model,  # type: ignore[call-overload]  # sqlite values
                    prompt_name=_opt(row.get("prompt_name")), prompt_version=_opt(row.get("prompt_version")),
                    start=end - latency / 1000, end=end, latency_ms=latency, tokens_in=tin,
                    tokens_cached=None if cached is None else int(cached), tokens_out=tout,  # type: ignore[call-overload]  # sqlite values
                    cost_usd=cost(model, tin, tout) if cost is not None else None,
                    attempts=int(row.get("attempts") or 1), cache_hit=bool(row.get("cache_hit")),  # type: ignore[call-overload]  # sqlite values
                    structured_ok=None if ok is None else bool(ok), error=_opt(row.get("error")))


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def assemble(root: Span, steps: Sequence[Step], calls: Sequence[CallSpan]) -> Span:
    """``root`` with ``steps`` as its children (in the order given) and every call filed under the step it made."""
    spans = [_span(s, root.span_id) for s in steps]
    flat = [(step, span) for top, span_top in zip(steps, spans, strict=True) for step, span in _pairs(top, span_top)]
    for call in sorted(calls, key=lambda c: (c.end, c.call_id)):
        owner = _owner(call, flat)
        (owner.calls if owner is not None else root.calls).append(call)
    root.children = spans
    for _, span in reversed(list(root.walk())):  # children before their parents
        _fit_times(span)
    return root


def _span(step: Step, parent_id: str) -> Span:
    span_id = f"{parent_id}/{step.key}"
    return Span(span_id=span_id, kind=step.kind, name=step.name, end=step.end, attrs=dict(step.attrs),
                retry_reasons=list(step.retry_reasons), children=[_span(s, span_id) for s in step.steps])


def _pairs(step: Step, span: Span) -> list[tuple[Step, Span]]:
    """Every step under ``step`` (itself last) beside the span made of it."""
    inner = [p for s, sp in zip(step.steps, span.children, strict=True) for p in _pairs(s, sp)]
    return [*inner, (step, span)]


def _owner(call: CallSpan, flat: Sequence[tuple[Step, Span]]) -> Span | None:
    """The earliest stored step that may claim the call and was stored after it ended (within the clock slack
    only when none was stored after it). A step holding sub-steps leaves the roles they name to them."""
    best: tuple[bool, float, Span] | None = None
    for step, span in flat:
        if not _may_claim(step, call.role) or step.end + SLACK_S < call.end:
            continue
        rank = (step.end < call.end, step.end)
        if best is None or rank < best[:2]:
            best = (rank[0], rank[1], span)
    return best[2] if best is not None else None


def _may_claim(step: Step, role: str) -> bool:
    if not step.claims or (step.roles and role not in step.roles):
        return False
    return not _names(step, role)


def _names(step: Step, role: str) -> bool:
    return any(role in s.roles or _names(s, role) for s in step.steps)


def _fit_times(span: Span) -> None:
    """A span starts with its first call or sub-step and ends when it was stored (or its last call ended)."""
    starts = [c.start for c in span.calls] + [c.start for c in span.children if c.start]
    ends = [c.end for c in span.calls] + [c.end for c in span.children if c.end]
    if starts:
        span.start = min(starts)
    if ends:
        span.end = max([span.end, *ends]) if span.end else max(ends)
    if not span.start:
        span.start = span.end


class TraceFilter(BaseModel):
    """What a trace view shows of a tree's calls: text searched in role, model, prompt and error; exact role/model;
    only failed calls; only calls asked again (transport attempts, or a step's rules sent a draft back)."""

    model_config = ConfigDict(extra="forbid")
    text: str = ""
    roles: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)
    errors_only: bool = False
    retried_only: bool = False

    def keeps(self, call: CallSpan, span: Span) -> bool:
        if self.roles and call.role not in self.roles:
            return False
        if self.models and call.model not in self.models:
            return False
        if self.errors_only and call.error is None:
            return False
        if self.retried_only and call.attempts <= 1 and not span.retry_reasons:
            return False
        needle = self.text.strip().lower()
        hay = " ".join(str(x) for x in (call.role, call.model, call.prompt_name, call.error, span.name,
                                         *span.retry_reasons) if x)
        return not needle or needle in hay.lower()


def filtered(root: Span, flt: TraceFilter) -> Span:
    """The tree with only the calls ``flt`` keeps, and only the spans that still hold one (the root always); with
    nothing asked, the whole tree (steps without calls, such as a judgment's samples, included)."""
    if flt == TraceFilter():
        return root
    def prune(span: Span) -> Span | None:
        children = [p for c in span.children if (p := prune(c)) is not None]
        calls = [c for c in span.calls if flt.keeps(c, span)]
        if not children and not calls and span is not root:
            return None
        return span.model_copy(update={"children": children, "calls": calls})
    return prune(root) or root.model_copy(update={"children": [], "calls": []})


def trace_kind(run_id: str, roles: Iterable[str]) -> SpanKind:
    """What a run id names, from the roles of its calls: a judgment, a memory build, a simulation, else a run."""
    roles = set(roles)
    if "judge" in roles or run_id.startswith("jdg-"):
        return "judgment"
    if roles == {"memory_builder"}:
        return "build"
    if roles & {"user_simulator", "assistant"}:
        return "simulation"
    return "run"
