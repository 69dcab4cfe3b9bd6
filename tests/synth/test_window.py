"""Synthesis fits the synthesizer's window: re-asks with long rejected answers never overflow it, every
request leaves room for its answer, and the cuts are recorded with the calls."""

import json

from backends.llm.context import REQUEST_OVERHEAD
from tests.synth.conftest import small_config
from tests.synth.fakes import SchemaLLM

WINDOW = 4096


def rejected_logs(n: int) -> list[str]:
    """Long answers that fail the schema (too few logs), each about 4,000 characters."""
    filler = "the user opened the app and looked at the screen for a while " * 60
    return [json.dumps({"logs": [{"timestamp": "x", "event": "e", "type": "t", "content": filler}]})] * n


def test_re_asks_are_fitted_and_every_request_leaves_room_for_the_answer(make_pipeline, home):
    fake = SchemaLLM(overrides={"SituationLogsReply": rejected_logs(2)})
    fake.window = WINDOW
    pipe = make_pipeline(small_config(months=1, situations_min=2, situations_max=2, max_logs=25, retries=3),
                         llm_fake=fake)
    info = pipe.run()
    assert info.status == "finished", info.error
    budget = pipe.llm.budget("synthesizer")
    for req in fake.requests:
        assert budget.count_messages(req.messages) + REQUEST_OVERHEAD + budget.slack + req.max_tokens <= WINDOW
    logs_calls = [r for r in pipe.llm.store.calls(limit=1000) if r["prompt_name"] == "synth/logs"]
    notes = " ".join(r["fit_note"] or "" for r in logs_calls)
    assert "correction turns" in notes or "max_tokens" in notes
    logs_requests = [r for r in fake.requests if r.response_format["json_schema"]["name"] == "SituationLogsReply"]
    third = logs_requests[2]  # asked after two rejected answers
    assert sum(m.role == "assistant" for m in third.messages) == 1  # the older one was left out to fit
    assert "rejected" in third.messages[-1].content
