"""A unit whose LLM call timed out runs once more in its environment's patient form (jobs.units.run_patiently)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import pytest

from backends.llm.errors import LLMTimeout
from jobs.types import Unit
from jobs.units import UnitContext, run_patiently


@dataclass
class Env:
    patience: float = 1.0

    def patient(self) -> Env:
        return replace(self, patience=2.0)


def context(env: object) -> UnitContext:
    unit = Unit(unit_id="u1", job_id="j1", seq=0, kind="test.kind", label="a unit", payload={}, status="running",
                attempts=1, max_attempts=3)
    return UnitContext(unit, env, threading.Event(), lambda fraction, text: None)


def test_a_unit_that_timed_out_runs_once_more_patiently():
    seen: list[float] = []

    def fn(ctx):
        seen.append(ctx.env.patience)
        if len(seen) == 1:
            raise LLMTimeout("no answer within 12 s")
        return {"ok": True}

    assert run_patiently(fn, context(Env())) == {"ok": True} and seen == [1.0, 2.0]


def test_a_second_timeout_or_one_already_retried_inside_fails_the_unit():
    seen: list[float] = []

    def always(ctx):
        seen.append(ctx.env.patience)
        raise LLMTimeout("no answer")

    with pytest.raises(LLMTimeout):
        run_patiently(always, context(Env()))
    assert seen == [1.0, 2.0]

    def retried_inside(ctx):
        seen.append(ctx.env.patience)
        error = LLMTimeout("no answer, twice")
        error.after_patience = True
        raise error

    seen.clear()
    with pytest.raises(LLMTimeout):
        run_patiently(retried_inside, context(Env()))
    assert seen == [1.0]
    runs = []

    def plain(ctx):
        runs.append(1)
        raise LLMTimeout("no answer")

    with pytest.raises(LLMTimeout):
        run_patiently(plain, context(object()))  # an environment without a patient form: failed at once
    assert runs == [1]
