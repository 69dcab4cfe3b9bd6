"""The shared fake endpoints' made-up answers are valid instances of every reply model the protocol asks for —
booleans, enums, numbers, nullable fields and bounded strings — and vary from request to request like a model's."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from backends.llm.structured import bounded_schema
from evaluation.faireval import JudgeOut
from evaluation.personamem.evaluate import JudgeOut as PersonaJudgeOut
from memory.methods.h2_parts import PrincipleAdjustOut, RequirementAdjustOut, SituationOut, TopicOut
from sim.decision import GuessDecision, VerdictDecision
from sim.simulator import FreeUserTurn
from testkit.schema_fill import schema_answer


class EveryType(BaseModel):
    flag: bool
    maybe: bool | None = None
    kind: Literal["a", "b", "c"]
    score: float = Field(ge=0, le=10)
    count: int = Field(ge=2, le=4)
    short: str = Field(min_length=3, max_length=12)
    long: str = Field(min_length=80, max_length=200)
    note: str | None = Field(None, max_length=40)
    items: list[Annotated[str, Field(max_length=30)]] = Field(min_length=2, max_length=3)


MODELS = [EveryType, GuessDecision, VerdictDecision, FreeUserTurn, JudgeOut, PersonaJudgeOut, SituationOut,
          TopicOut, RequirementAdjustOut, PrincipleAdjustOut]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_answer_validates_against_its_reply_model(model):
    schema = bounded_schema(model) if model is not EveryType else EveryType.model_json_schema()
    for i in range(40):
        model.model_validate(schema_answer(model.__name__, schema, f"request {i}"))


def test_booleans_and_sentences_vary_between_requests_and_repeat_for_the_same_request():
    schema = bounded_schema(VerdictDecision)
    answers = [schema_answer("VerdictDecision", schema, f"chat {i}") for i in range(30)]
    assert {a["accept"] for a in answers} == {True, False}
    openings = {a["why"].split(" (")[0] for a in answers}
    assert len(openings) > 10  # sentences, not one template with a counter
    assert all(len(a["why"]) <= 120 for a in answers)
    assert schema_answer("VerdictDecision", schema, "chat 3") == answers[3]


def test_bounds_are_kept_whatever_the_bound():
    schema = EveryType.model_json_schema()
    for i in range(50):
        value = EveryType.model_validate(schema_answer("EveryType", schema, f"r{i}"))
        assert 3 <= len(value.short) <= 12 and 80 <= len(value.long) <= 200 and 2 <= value.count <= 4
        assert 2 <= len(value.items) <= 3
