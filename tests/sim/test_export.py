"""Exports of a simulation run: JSON is the complete record, Markdown a readable transcript with acts."""

import json

from palset.vocab import Act
from sim.export import run_to_json, run_to_markdown
from sim.types import RunRecord, RunSpec, Utterance


def record(**kw) -> RunRecord:
    spec = RunSpec(dataset="/data/demo", user_id="1001", sample_id="1001_sample7", topic_key="topic-1",
                   method="rag-turn", seed="3", free_query=kw.pop("free_query", None))
    trace = {"tokens": 120, "full_history_tokens": 4800, "items": [{"id": "a", "layer": "turn", "score": 0.9,
                                                                     "text": "likes quiet places"}]}
    utts = [
        Utterance(turn_no=1, side="user", actor="simulator", act=Act.TOPIC_INQUIRY, content="Where should I eat?"),
        Utterance(turn_no=1, side="assistant", actor="assistant", act=Act.REQUIREMENT_PREDICTION,
                  content="Somewhere quiet?\nMaybe near home.", retrieval_query="quiet dinner place", trace=trace),
        Utterance(turn_no=2, side="user", actor="human", act=Act.REQUIREMENT_CONFIRMATION, content="Yes, quiet."),
    ]
    return RunRecord(run_id="run-1001-rag-turn-abc", spec=spec, status="stopped", schedule_source="derived",
                     settings={"assistant": {"provider": "openai", "model": "m1", "temperature": 0.7}},
                     pair_id="pair-x", utterances=utts, **kw)


def test_json_is_the_whole_record_and_round_trips():
    rec = record()
    text = run_to_json(rec)
    assert RunRecord.model_validate_json(text) == rec
    data = json.loads(text)
    assert data["utterances"][1]["trace"]["tokens"] == 120 and data["pair_id"] == "pair-x"


def test_markdown_is_a_transcript_with_speakers_acts_and_memory_notes():
    md = run_to_markdown(record(free_query="Dinner ideas?"))
    assert md.startswith("# Simulation run-1001-rag-turn-abc\n")
    for line in ("- User: 1001", "- Session and topic: 1001_sample7 · topic-1", "- Memory method: rag-turn",
                 "- Schedule: fixed (derived)", "- Seed: 3", "- Status: stopped", "- Opening question (typed): Dinner ideas?",
                 "- assistant: openai · m1 · temperature 0.7"):
        assert line in md
    assert "**Turn 1 · User (simulator) · Topic Inquiry**\n\n> Where should I eat?" in md
    assert "**Turn 1 · Assistant · Requirement Prediction**\n\n> Somewhere quiet?\n> Maybe near home." in md
    assert "retrieval query: quiet dinner place" in md and "120 tokens of 4,800" in md and "1 item(s)" in md
    assert "**Turn 2 · Person (as user) · Requirement Confirmation**" in md
    assert md.index("Topic Inquiry") < md.index("Requirement Prediction") < md.index("Requirement Confirmation")


def test_markdown_of_an_empty_failed_run_says_so():
    rec = record(error="assistant: no usable utterance")
    rec.status, rec.utterances = "failed", []
    md = run_to_markdown(rec)
    assert "- Status: failed (assistant: no usable utterance)" in md and "(no utterance yet)" in md
