"""Traces of the lab's work: a simulation's turns, a memory build's stages and a judgment's samples as the steps
of :mod:`backends.trace`, with the calls each made under them.

A simulation's turn has its two sides as steps (the User-LLM's calls under the user's, the assistant's under the
assistant's); a user turn asked again names the rules that sent each draft back (``Utterance.drafts``) or, for a
turn stored before drafts were kept, says that its reasons were not kept. A build's steps are its stages (each
session's logs, then its dialogue). A judgment's samples carry no time of their own (they are asked together), so
its calls sit under the judgment itself, and each order lists its samples: scores, attempts and why a sample was
asked again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from backends.trace import CallSpan, CostFn, Span, Step, assemble, call_span, trace_kind
from evaluation.faireval import JudgeSample, Judgment
from sim.interventions import NOT_KEPT, kind_of
from sim.types import RunRecord, Utterance

ROLE_OF_SIDE = {"user": "user_simulator", "assistant": "assistant"}


class TraceSources(Protocol):
    """What a trace is read from (the workspace's stores)."""

    def calls_of(self, run_id: str) -> list[dict]: ...
    def sim_run(self, run_id: str) -> RunRecord | None: ...
    def build_stages(self, build_id: str) -> list[dict] | None: ...
    def judgment(self, key: str) -> Judgment | None: ...


def side_step(utt: Utterance) -> Step:
    """One side of a turn; a simulated user turn asked again says why (each draft's reasons, in order)."""
    reasons = [r for d in utt.drafts for r in d.reasons if not d.kept]
    if utt.attempts > 1 and not reasons:
        reasons = [f"asked {utt.attempts}× — " + (NOT_KEPT if utt.side == "user" and not utt.drafts_kept
                                                 else "the reasons were not recorded")]
    if utt.fallback:
        reasons.append(utt.fallback)
    person = utt.actor == "human"
    kind = kind_of(utt) if utt.side == "user" else ("asked again" if utt.attempts > 1 else "none")
    return Step(key=utt.side, kind="side", name=f"{utt.side} · {utt.act.value}", end=utt.created_at,
                roles=frozenset({ROLE_OF_SIDE[utt.side]}), claims=not person, retry_reasons=reasons,
                attrs={"actor": utt.actor, "act": utt.act.value, "attempts": utt.attempts, "intervention": kind,
                       "prompt": utt.prompt_name, "model": utt.model, "words": utt.content[:160]})


def simulation_steps(record: RunRecord) -> list[Step]:
    """A step per turn, its sides inside, in turn order."""
    by_turn: dict[int, list[Utterance]] = {}
    for utt in record.utterances:
        by_turn.setdefault(utt.turn_no, []).append(utt)
    steps = []
    for turn_no in sorted(by_turn):
        sides = sorted(by_turn[turn_no], key=lambda u: u.created_at)
        steps.append(Step(key=f"turn{turn_no}", kind="turn", name=f"turn {turn_no} of {_turns(record)}",
                          end=max(u.created_at for u in sides), steps=[side_step(u) for u in sides],
                          attrs={"turn": turn_no}))
    return steps


def _turns(record: RunRecord) -> str:
    planned = len(record.schedule) or int(record.settings.get("max_turns") or 0)
    return str(planned) if planned else "?"


def build_steps(stages: Sequence[Mapping[str, object]]) -> list[Step]:
    """A step per committed stage of a memory build (``memory_build_stages`` rows), in stage order."""
    steps = []
    for row in sorted(stages, key=lambda r: int(r["stage"])):  # type: ignore[call-overload]  # sqlite values
        stage = int(row["stage"])  # type: ignore[call-overload]  # sqlite values
        what = "logs" if stage % 2 == 0 else "dialogue"
        steps.append(Step(key=f"stage{stage}", kind="stage", name=f"session {row['sample_id']} · {what}",
                          end=float(row["finished_at"]),  # type: ignore[arg-type]  # sqlite values
                          roles=frozenset({"memory_builder"}),
                          attrs={"stage": stage, "session": str(row["sample_id"]), "step": what}))
    return steps


def sample_step(sample: JudgeSample) -> Step:
    reasons = list(sample.errors) if sample.attempts > 1 or not sample.ok else []
    score = f"{sample.slot1}–{sample.slot2}" if sample.ok else "no valid answer"
    return Step(key=f"o{sample.order}s{sample.index}", kind="sample", name=f"sample {sample.index + 1}: {score}",
                end=0.0, claims=False, retry_reasons=reasons,
                attrs={"order": sample.order, "ok": sample.ok, "attempts": sample.attempts,
                       "score_a": sample.score_a, "score_b": sample.score_b})


def judgment_steps(j: Judgment) -> list[Step]:
    """Each order with its samples (no times of their own: the judgment's calls stay under the judgment)."""
    orders = []
    for order in (1, 2):
        samples = [s for s in j.samples if s.order == order]
        first = "A" if order == 1 else "B"
        orders.append(Step(key=f"order{order}", kind="order", name=f"order {order} (assistant 1 is {first})",
                           end=j.created_at, claims=False, steps=[sample_step(s) for s in samples],
                           attrs={"samples": len(samples), "winner": getattr(j, f"order{order}_winner")}))
    return orders


def load_trace(sources: TraceSources, run_id: str, cost: CostFn | None = None) -> Span:
    """The trace of one run id: its calls under the steps its record names (a run the domains do not know, or
    one whose record is gone, keeps its calls under the root). KeyError when nothing was recorded under it."""
    calls: list[CallSpan] = [call_span(r, cost) for r in sources.calls_of(run_id)]
    kind = trace_kind(run_id, {c.role for c in calls})
    steps: list[Step] = []
    attrs: dict[str, str | int | float | bool | None] = {}
    name = run_id
    if (record := sources.sim_run(run_id)) is not None:
        kind, steps = "simulation", simulation_steps(record)
        s = record.spec
        name = f"simulation · user {s.user_id} · {s.method} · {s.mode}"
        attrs = {"status": record.status, "turns": len({u.turn_no for u in record.utterances}),
                 "planned": _turns(record), "ended": record.error or ""}
    elif (stages := sources.build_stages(run_id)) is not None:
        kind, steps, name = "build", build_steps(stages), f"memory build {run_id}"
        attrs = {"stages": len(stages)}
    elif (j := sources.judgment(run_id)) is not None:
        kind, steps = "judgment", judgment_steps(j)
        name = f"judgment · {j.method_a} vs {j.method_b} · {j.aspect}"
        attrs = {"decision": j.decision, "judge": j.judge_model, "k": j.k, "prompt": j.prompt_version}
    elif not calls:
        raise KeyError(f"nothing recorded under {run_id!r}")
    root = Span(span_id=run_id, kind=kind, name=name, attrs={"run_id": run_id, **attrs})
    return assemble(root, steps, calls)
