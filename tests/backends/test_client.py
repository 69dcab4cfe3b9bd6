"""LLMClient with the scripted fake: cache, retries, accounting, structured output, redaction."""

from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from backends.config import ROLES
from backends.llm.errors import BadRequest, RateLimited, ServerError
from backends.llm.fake import ScriptedLLM
from backends.prompts import parse_prompt

MSG = [{"role": "user", "content": "hello"}]


def every_role(fake):
    return dict.fromkeys(ROLES, fake)


def test_cache_hit_costs_no_call_and_is_recorded(make_client):
    fake = ScriptedLLM(["first", "second"])
    client = make_client(every_role(fake))
    a = client.chat("assistant", MSG)
    b = client.chat("assistant", MSG)
    assert (a.text, b.text, b.cache_hit) == ("first", "first", True)
    assert len(fake.requests) == 1
    c = client.chat("assistant", MSG, use_cache=False)
    assert c.text == "second"
    rows = client.store.calls("s1")
    assert [r["cache_hit"] for r in reversed(rows)] == [0, 1, 0]


def test_cache_salt_gives_independent_samples(make_client):
    fake = ScriptedLLM(["one", "two"])
    client = make_client(every_role(fake))
    assert client.chat("judge", MSG, cache_salt="k0").text == "one"
    assert client.chat("judge", MSG, cache_salt="k1").text == "two"


def test_retries_transient_errors_then_succeeds(make_client):
    fake = ScriptedLLM([RateLimited("429", retry_after=0.01), ServerError("500", retry_after=0.01), "ok"])
    client = make_client(every_role(fake))
    result = client.chat("assistant", MSG)
    assert result.text == "ok" and result.attempts == 3


def test_non_retryable_error_fails_at_once_and_is_recorded(make_client):
    fake = ScriptedLLM([BadRequest("bad model"), "never"])
    client = make_client(every_role(fake))
    with pytest.raises(BadRequest):
        client.chat("assistant", MSG)
    assert len(fake.requests) == 1
    assert client.store.calls("s1")[0]["error"].startswith("BadRequest")


def test_accounting_records_role_model_prompt_and_tokens(make_client):
    client = make_client(every_role(ScriptedLLM(["a b c"])))
    prompt = parse_prompt("memory/summarise", "---\nversion: 7\n---\n$x")
    client.chat("memory_builder", MSG, prompt=prompt)
    row = client.store.calls("s1")[0]
    assert (row["role"], row["prompt_name"], row["prompt_version"], row["tokens_out"]) == ("memory_builder", "memory/summarise", "7", 3)
    assert client.store.totals("s1").tokens_out == 3


class Verdict(BaseModel):
    score: int = Field(ge=1, le=10)
    reason: str = Field(max_length=100)


def test_structured_feeds_validation_errors_back_then_succeeds(make_client):
    fake = ScriptedLLM(['{"score": 42, "reason": "x"}', 'Sure: {"score": 7, "reason": "fine",}'])
    client = make_client(every_role(fake))
    out = client.structured("judge", MSG, Verdict)
    assert out.ok and out.value.score == 7 and out.attempts == 2 and out.repaired
    retry_msgs = fake.requests[1].messages
    assert "less than or equal to 10" in retry_msgs[-1].content
    assert fake.requests[0].response_format["json_schema"]["schema"]["properties"]["score"]["maximum"] == 10
    assert "fields: score, reason" in fake.requests[0].messages[-1].content  # grammar-enforced: short hint, last


def test_each_re_ask_samples_with_its_own_seed(make_client):
    """An endpoint that honours ``seed`` repeats itself on a repeated prompt; once the correction turns no longer
    fit, a re-ask would be that prompt, so each attempt after the first moves the caller's seed on."""
    fake = ScriptedLLM(['{"score": 42, "reason": "x"}', '{"score": 43, "reason": "x"}', '{"score": 7, "reason": "y"}'])
    client = make_client(every_role(fake))
    assert client.structured("judge", MSG, Verdict, retries=2, seed=100).ok
    assert [r.seed for r in fake.requests] == [100, 101, 102]
    unseeded = ScriptedLLM(['{"score": 42, "reason": "x"}', '{"score": 7, "reason": "y"}'])
    assert make_client(every_role(unseeded)).structured("judge", MSG, Verdict).ok
    assert [r.seed for r in unseeded.requests] == [None, None]  # no seed asked for, none invented


def test_structured_failure_keeps_every_raw_text(make_client):
    fake = ScriptedLLM(["nope", "still no", "{broken"])
    client = make_client(every_role(fake))
    out = client.structured("judge", MSG, Verdict, retries=2)
    assert not out.ok and out.raw == ["nope", "still no", "{broken"] and len(out.errors) == 3


def test_structured_json_object_mode_for_endpoints_without_schemas(make_client):
    fake = ScriptedLLM(['{"score": 2, "reason": "r"}'])
    client = make_client(every_role(fake), env={"PAL_JUDGE_STRUCTURED_MODE": "json_object"})
    assert client.structured("judge", MSG, Verdict).ok
    assert fake.requests[0].response_format == {"type": "json_object"}
    assert '"maximum":10' in fake.requests[0].messages[-1].content  # no grammar: the full schema is in the prompt


class Bounded(BaseModel):
    note: str = Field(max_length=20)
    tags: list[Annotated[str, Field(max_length=10)]] = Field(max_length=2)  # bounded_schema refuses unbounded ones


@pytest.mark.parametrize("mode", ["json_schema_strict", "json_object", "prompt"])
def test_bounds_are_kept_in_every_fallback_mode(make_client, mode):
    """Where the endpoint does not enforce maxLength/maxItems (strict servers drop them, json_object and prompt
    have no grammar) the bounds are still in the prompt, last, and an answer over them is sent back, not kept."""
    fake = ScriptedLLM(['{"note": "' + "x" * 40 + '", "tags": ["a"]}', '{"note": "short", "tags": ["a", "b"]}'])
    client = make_client(every_role(fake), env={"PAL_MEMORY_BUILDER_STRUCTURED_MODE": mode})
    system = {"role": "system", "content": "shared context"}
    out = client.structured("memory_builder", [system, {"role": "user", "content": "step"}], Bounded)
    assert out.ok and out.value.note == "short" and out.attempts == 2
    first = fake.requests[0]
    assert first.messages[0].content == "shared context"  # the shared part stays first, untouched
    last = first.messages[-1].content
    assert last.startswith("step") and '"maxLength":20' in last and '"maxItems":2' in last
    if mode == "json_schema_strict":
        assert "maxLength" not in str(first.response_format)  # what the server is sent loses it; the prompt keeps it
    assert "at most 20 characters" in fake.requests[1].messages[-1].content


def test_stream_yields_deltas_then_result_and_caches(make_client):
    fake = ScriptedLLM(["one two three"])
    client = make_client(every_role(fake))
    chunks = list(client.stream("assistant", MSG))
    assert "".join(c for c in chunks if isinstance(c, str)).strip() == "one two three"
    assert chunks[-1].text == "one two three"
    again = list(client.stream("assistant", MSG))
    assert again[-1].cache_hit and len(fake.requests) == 1


class CountingStream(ScriptedLLM):
    """A provider that notes how many deltas it has sent when the caller reads each one."""

    def stream(self, req):
        self.sent = 0
        result = self.complete(req)
        for word in result.text.split(" "):
            self.sent += 1
            yield word + " "
        yield result


def test_stream_hands_on_each_delta_as_it_arrives(make_client):
    """A delta reaches the caller before the provider sends the next (the Simulate page shows a turn as it is
    written): the client must not read the whole answer first."""
    fake = CountingStream(["one two three four"])
    client = make_client(every_role(fake))
    seen = [fake.sent for chunk in client.stream("assistant", MSG, use_cache=False) if isinstance(chunk, str)]
    assert seen == [1, 2, 3, 4]


class NoteHow(ScriptedLLM):
    """A provider that notes whether each call was streamed."""

    def __init__(self, replies):
        super().__init__(replies)
        self.how: list[str] = []

    def complete(self, req):
        self.how.append("complete")
        return super().complete(req)

    def stream(self, req):
        self.how.append("stream")
        result = super().complete(req)
        for word in result.text.split(" "):
            yield word + " "
        yield result


def test_an_unwatched_view_streams_nothing_yet_answers_and_records_as_a_stream_does(make_client):
    """Work nobody watches (a command's job, a Ray worker) asks without streaming: the whole answer comes as one
    delta, then the result, recorded once; the watched client still streams."""
    fake = NoteHow(["one two three", "four five"])
    client = make_client(every_role(fake))
    quiet = client.unwatched()
    chunks = list(quiet.stream("assistant", MSG, use_cache=False))
    assert fake.how == ["complete"]
    assert chunks[:-1] == ["one two three"] and chunks[-1].text == "one two three"
    assert len(client.store.calls("s1")) == 1
    assert quiet.patient().streaming is False and client.streaming is True  # views of it keep it
    watched = [c for c in client.stream("assistant", MSG, use_cache=False) if isinstance(c, str)]
    assert fake.how == ["complete", "stream"] and len(watched) == 2


def test_an_unwatched_stream_stopped_on_what_it_read_yields_no_result(make_client):
    """A caller that stops a stream on its text (a draft given away mid-sentence) gets no result from an unwatched
    view either, as from a stream stopped there."""
    import threading

    client = make_client(every_role(NoteHow(["the hidden need"]))).unwatched()
    cancel = threading.Event()
    seen = []
    for chunk in client.stream("assistant", MSG, use_cache=False, cancel=cancel):
        seen.append(chunk)
        if isinstance(chunk, str) and "hidden" in chunk:
            cancel.set()
    assert seen == ["the hidden need"]


def test_structured_streams_its_first_answer_to_on_text_and_records_the_mode(make_client):
    """A caller that reads the JSON while it is written (a user's decision shown as soon as its value is out) gets
    the first attempt's deltas; a correction is asked but not streamed, so the caller reads one JSON text."""
    fake = CountingStream(['{"score": 42, "reason": "x"}', '{"score": 7, "reason": "fine"}'])
    client = make_client(every_role(fake))
    seen: list[tuple[str, int]] = []
    out = client.structured("judge", MSG, Verdict, on_text=lambda d: seen.append((d, fake.sent)))
    assert out.ok and out.value.score == 7 and out.attempts == 2
    assert "".join(d for d, _ in seen).strip() == '{"score": 42, "reason": "x"}'
    assert [n for _, n in seen] == [1, 2, 3, 4]  # each delta as it arrives, not after the whole answer
    rows = client.store.calls("s1")
    assert [r["structured_mode"] for r in rows] == ["json_schema", "json_schema"]
    assert fake.requests[0].response_format is not None  # the grammar is sent with the streamed request too


def test_a_structured_stream_cancelled_before_its_end_raises_cancelled(make_client):
    import threading

    from backends.llm.errors import Cancelled

    cancel = threading.Event()
    client = make_client(every_role(ScriptedLLM(['{"score": 3, "reason": "a long reason"}'])))
    with pytest.raises(Cancelled):
        client.structured("judge", MSG, Verdict, cancel=cancel, on_text=lambda d: cancel.set())


def test_configured_keys_are_redacted_from_errors_and_records(make_client):
    key = "sk-live-abcdef123456"
    fake = ScriptedLLM([BadRequest(f"invalid api key {key}")])
    client = make_client(every_role(fake), env={"PAL_DEFAULT_API_KEY": key})
    with pytest.raises(BadRequest) as e:
        client.chat("assistant", MSG)
    assert key not in str(e.value) and "***" in str(e.value)
    assert all(key not in str(v) for row in client.store.calls() for v in row.values())
