"""Fixtures for PLUM tests: a scripted QA writer, and builders whose training step is recorded, not run."""

from __future__ import annotations

import json

import pytest

from testkit.requests import prompt_text, schema_name


def qa_reply(positives=None, negatives=None, broken: set[str] = frozenset()):
    """Scripted ``memory_builder`` replies: ``positives`` / ``negatives`` are callables of the prompt (or lists);
    a schema named in ``broken`` always gets garbage."""

    def reply(req) -> str:
        name, prompt = schema_name(req), prompt_text(req)
        if name in broken:
            return "sorry, I cannot do JSON {"
        if name == "PositiveQA":
            pairs = positives(prompt) if callable(positives) else positives
            return json.dumps({"pairs": pairs if pairs is not None else [
                {"topic": "brother's maths exam", "question": "What did I tell you about my brother's exam?",
                 "answer": "You told me Callum failed a maths module twice."},
                {"topic": "night messages", "question": "What did we discuss about the late messages?",
                 "answer": "You said he messages you at 4am."}]})
        if name == "NegativeTopics":
            topics = negatives(prompt) if callable(negatives) else negatives
            return json.dumps({"topics": topics if topics is not None else ["holiday in Spain", "car insurance",
                                                                            "a new laptop"]})
        raise AssertionError(f"unexpected request {name}")

    return reply


@pytest.fixture
def plum_builder(build_memory, monkeypatch):
    """``plum_builder(user, reply, config=None)`` → (builder, fake, trained): training calls are recorded in
    ``trained`` as (sample id, pairs) instead of running the model."""
    from memory.methods.plum import Plum
    from memory.plum.adapter import Checkpoint, TrainRecord

    trained: list[tuple[str, list[tuple[str, str]]]] = []

    def fake_train(self, session, pairs):
        trained.append((session.sample_id, pairs))
        rec = TrainRecord(sample_id=session.sample_id, session_index=session.index, position=0, pairs=len(pairs),
                          steps=2, losses=[2.0, 1.0], version="v" + str(len(trained)))
        return Checkpoint(folder=self.adapters.root / session.sample_id, record=rec)

    monkeypatch.setattr(Plum, "_train", fake_train)

    def make(user, reply, config=None):
        builder, fake = build_memory("plum", user, reply, config)
        return builder, fake, trained

    return make
