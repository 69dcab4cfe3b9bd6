"""Call deadlines from the endpoint's measured speed; a stalled server told from a slow one (real HTTP servers)."""

from __future__ import annotations

import time

import pytest
from pydantic import BaseModel, Field

from backends.config import ROLES
from backends.llm.deadline import ASSUMED_RATES, Rates, call_deadline
from backends.llm.errors import LLMTimeout
from backends.llm.fake import ScriptedLLM
from backends.llm.openai_compat import OpenAICompatProvider
from backends.llm.rates import RateBook, RateError
from backends.llm.types import ChatRequest, ChatResult, Message
from testkit.trickle_server import TrickleServer
from testkit.workspace import make_workspace

MSG = [{"role": "user", "content": "Say ok many times."}]
RATES = Rates(prompt=100.0, decode=10.0, slots=2, source="measured for the test")


class Said(BaseModel):
    text: str = Field(max_length=2000)


def env_for(server: TrickleServer, **extra: str) -> dict[str, str]:
    return {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "m",
            **extra}


def test_a_deadline_is_what_the_call_needs_at_the_rates():
    short = call_deadline(prompt_tokens=100, max_tokens=100, rates=RATES, idle=60)
    long = call_deadline(prompt_tokens=3000, max_tokens=2048, rates=RATES, idle=60)
    assert long.total > short.total
    assert long.total >= 3000 / RATES.prompt + 2048 / RATES.decode  # never less than the need itself
    assert "2,048 answer tokens" in long.how and "decode 10.0 tok/s" in long.how and "measured for the test" in long.how
    assert long.first == 60 and short.first == min(60, short.total)  # the idle limit, never past the deadline
    huge = call_deadline(prompt_tokens=12000, max_tokens=100, rates=RATES, idle=60)
    assert huge.first >= 12000 / RATES.prompt  # the first token may wait for a long prompt
    slower = call_deadline(prompt_tokens=3000, max_tokens=2048, rates=RATES.model_copy(update={"decode": 5.0}), idle=60)
    assert slower.total > long.total


def test_a_configured_timeout_wins_and_a_retry_gets_longer():
    configured = call_deadline(prompt_tokens=3000, max_tokens=2048, rates=RATES, idle=60, configured=42)
    assert configured.total == 42 and "configured timeout of 42 s" in configured.how
    assert configured.first <= configured.total
    patient = call_deadline(prompt_tokens=3000, max_tokens=2048, rates=RATES, idle=60, factor=2)
    assert patient.total > call_deadline(prompt_tokens=3000, max_tokens=2048, rates=RATES, idle=60).total
    assert "second try" in patient.how


class Measured:
    """A provider whose speed can be measured; counts the measurements."""

    def __init__(self, fail: bool = False):
        self.measured, self.fail = 0, fail
        self.endpoint = f"http://fake-{'failing' if fail else 'fine'}-{id(self)}:1/v1"

    def measure_rates(self, model: str) -> Rates:
        self.measured += 1
        if self.fail:
            raise RateError("no timings")
        return RATES


def test_rates_are_measured_once_remembered_and_measured_again_when_outdated(make_client, tmp_path):
    store = make_client().store.capabilities
    book, provider = RateBook(store), Measured()
    assert book.rates(provider, "m").decode == RATES.decode and provider.measured == 1
    again = RateBook(store).rates(provider, "m")  # another client, another process: the same row
    assert (again.prompt, again.decode, provider.measured) == (RATES.prompt, RATES.decode, 1)
    elsewhere = make_workspace(tmp_path / "other-home").runs.capabilities  # another home, the same server
    assert RateBook(elsewhere).rates(provider, "m").decode == RATES.decode and provider.measured == 1
    assert elsewhere.get(provider.endpoint, "m").decode_rate == RATES.decode  # and remembered there too
    book.outdated(provider.endpoint, "m")
    book.rates(provider, "m")
    assert provider.measured == 2
    later = RateBook(store, clock=lambda: time.time() + 2 * 24 * 3600)  # a day later the machine may differ
    later.rates(provider, "m")
    assert provider.measured == 3


def test_an_endpoint_that_cannot_be_measured_gets_the_assumed_rates(make_client, caplog):
    book = RateBook(make_client().store.capabilities)
    server = TrickleServer(slots=2)  # a lab's llama.cpp server: measured only when asked
    with server.running():
        lab = OpenAICompatProvider(server.base_url, None)
        assert book.rates(lab, "m") == ASSUMED_RATES and server.requests == []
        hosted = OpenAICompatProvider("http://127.0.0.1:9/v1", None)
        hosted.slots = lambda: None  # a hosted API does not say its slots
        assert book.measure(hosted, "m") is None  # never measured: that would spend the account's tokens
    failing = Measured(fail=True)
    assert book.rates(failing, "m") == ASSUMED_RATES
    assert "could not measure" in caplog.text


@pytest.mark.slow(seconds=45)
def test_200_tokens_at_5_per_second_finish_on_the_defaults(make_client):
    """The issue's trickle: 40 s of answer, read as it comes, its deadline from the speed the platform measured of
    this server (it says its slots, as llama.cpp does, and was measured when asked)."""
    server = TrickleServer(tokens=200, rate=5.0, slots=1)
    with server.running():
        client = make_client(env=env_for(server, PAL_DEFAULT_MAX_TOKENS="256"))
        rates = client.rates.measure(client.provider("memory_builder"), "m")
        assert rates is not None and rates.decode == pytest.approx(5.0, rel=0.05)
        started = time.monotonic()
        seen: list[str] = []
        result = client.structured("memory_builder", MSG, Said, on_text=seen.append, use_cache=False)
        took = time.monotonic() - started
    assert result.ok and result.value.text.count("ok") == 200
    assert took >= 200 / 5.0 - 1 and len(seen) >= 200  # it did trickle, and every piece was read as it came
    call = client.store.calls(session_id=client.session_id)[0]
    assert call["error"] is None
    chat = [r for r in server.requests if not (r.get("max_tokens") == 1 or r.get("ignore_eos"))]
    assert len(chat) == 1 and chat[0]["stream"] is True  # answered once: no timeout, no retry


@pytest.mark.slow(seconds=6)
def test_a_stalled_stream_fails_on_the_idle_limit_with_the_reason(make_client):
    server = TrickleServer(tokens=20, rate=50.0, stall_after=5, stall_s=15.0)
    with server.running():
        client = make_client(env=env_for(server, PAL_DEFAULT_IDLE_TIMEOUT="2"))
        started = time.monotonic()
        with pytest.raises(LLMTimeout) as e:
            list(client.stream("assistant", MSG, use_cache=False))
        took = time.monotonic() - started
    assert took < 8  # the idle limit, not the whole answer's deadline (minutes at the assumed rates)
    message = str(e.value)
    assert "stalled" in message and "no token for 2 s" in message and "IDLE_TIMEOUT" in message
    assert any("stalled" in (c["error"] or "") for c in client.store.calls(session_id=client.session_id))


@pytest.mark.slow(seconds=6)
def test_an_answer_read_as_a_stream_fails_on_a_stall_not_on_its_length():
    """The bundled server's answers are all read this way, structured ones included (LocalProvider.complete)."""
    slow = TrickleServer(tokens=30, rate=10.0)
    req = ChatRequest(model="m", messages=[Message(role="user", content="hi")], max_tokens=64, timeout=1,
                      first_token_timeout=1.5, deadline_note="for the test")
    with slow.running():  # 3 s of answer, a piece every 0.1 s: past its 1 s total and the idle limit, never idle
        result = OpenAICompatProvider(slow.base_url, None).complete_streamed(req)
    assert isinstance(result, ChatResult) and result.text.count("ok") == 30
    stalled = TrickleServer(tokens=30, rate=10.0, stall_after=3, stall_s=10.0)
    with stalled.running():
        started = time.monotonic()
        with pytest.raises(LLMTimeout, match="stalled.*for the test"):
            OpenAICompatProvider(stalled.base_url, None).complete_streamed(req)
    assert time.monotonic() - started < 6


def test_a_meter_shows_when_the_call_in_flight_started_and_what_it_needs(make_client):
    """The progress line beside a build or a generation: the call running now, and how long it needs at most."""
    from backends.llm.meter import CallMeter

    meter, seen = CallMeter(), []
    meter.watch(seen.append)
    client = make_client(providers=dict.fromkeys(ROLES, ScriptedLLM(["fine"]))).metered(meter)
    provider = client.provider("assistant")
    client.rates.remember(provider.endpoint, client.config.role("assistant").model, RATES)
    client.chat("assistant", MSG, use_cache=False, max_tokens=100)
    during = [r for r in seen if r.in_flight]
    assert during and during[0].oldest_started is not None
    assert any(r.oldest_need_s and r.oldest_need_s >= 100 / RATES.decode for r in during)  # the measured need
    line = meter.reading().line()
    assert "running since" not in line  # nothing in flight now
    meter.started()
    meter.expect(100 / RATES.decode)
    assert "a call running since" in meter.reading().line() and "up to ~10 s" in meter.reading().line()
    meter.ended()
