"""The real HTTP path (openai client → a misbehaving local server): recover or fail typed, never hang."""

import time

import pytest
from pydantic import BaseModel, Field

from backends.llm.errors import BadResponse, LLMTimeout, RateLimited, ServerError
from testkit.fault_server import FaultServer

MSG = [{"role": "user", "content": "hi"}]


def env_for(server, **extra):
    return {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "m",
            "PAL_DEFAULT_API_KEY": "sk-test-key-123", "PAL_DEFAULT_TIMEOUT": "2", "PAL_DEFAULT_MAX_RETRIES": "3", **extra}


def test_429_with_retry_after_is_honoured(make_client):
    server = FaultServer([("429", 1), ("ok", "after wait")])
    with server.running():
        client = make_client(env=env_for(server))
        t0 = time.monotonic()
        result = client.chat("assistant", MSG, use_cache=False)
        waited = time.monotonic() - t0
    assert result.text == "after wait" and result.attempts == 2
    assert 0.9 <= waited < 5


def test_500s_then_success(make_client):
    server = FaultServer([("500",), ("500",), ("ok", "third time")])
    with server.running():
        result = make_client(env=env_for(server)).chat("assistant", MSG, use_cache=False)
    assert result.text == "third time" and len(server.requests) == 3


def test_persistent_errors_end_with_a_typed_error_within_budget(make_client):
    server = FaultServer(default=("500",))
    with server.running():
        client = make_client(env=env_for(server, PAL_DEFAULT_MAX_RETRIES="2"))
        t0 = time.monotonic()
        with pytest.raises(ServerError, match="server error 500"):
            client.chat("assistant", MSG, use_cache=False)
    assert len(server.requests) == 3 and time.monotonic() - t0 < 10
    server = FaultServer(default=("429", None))
    with server.running():
        with pytest.raises(RateLimited) as e:
            make_client(env=env_for(server, PAL_DEFAULT_MAX_RETRIES="1")).chat("assistant", MSG, use_cache=False)
    assert "sk-test-key-123" not in str(e.value)


def test_slow_responses_time_out_and_recover(make_client):
    server = FaultServer([("slow", 3, "late"), ("ok", "quick")])
    with server.running():
        client = make_client(env=env_for(server, PAL_DEFAULT_TIMEOUT="1"))
        t0 = time.monotonic()
        result = client.chat("assistant", MSG, use_cache=False)
    assert result.text == "quick" and time.monotonic() - t0 < 8
    server = FaultServer(default=("slow", 3, "late"))
    with server.running():
        client = make_client(env=env_for(server, PAL_DEFAULT_TIMEOUT="1", PAL_DEFAULT_MAX_RETRIES="1"))
        t0 = time.monotonic()
        with pytest.raises(LLMTimeout):
            client.chat("assistant", MSG, use_cache=False)
        assert time.monotonic() - t0 < 8


def test_malformed_json_bodies_are_retried_then_typed(make_client):
    server = FaultServer([("badjson",), ("ok", "recovered")])
    with server.running():
        assert make_client(env=env_for(server)).chat("assistant", MSG, use_cache=False).text == "recovered"
    server = FaultServer(default=("badjson",))
    with server.running():
        with pytest.raises(BadResponse):
            make_client(env=env_for(server, PAL_DEFAULT_MAX_RETRIES="1")).chat("assistant", MSG, use_cache=False)


class Answer(BaseModel):
    answer: str = Field(max_length=20)


def test_broken_json_from_a_model_becomes_a_structured_failure_not_a_crash(make_client):
    server = FaultServer([("ok", "I think the answer is {answer: maybe"), ("ok", '{"answer": "yes"}')])
    with server.running():
        out = make_client(env=env_for(server)).structured("judge", MSG, Answer, use_cache=False)
    assert out.ok and out.value.answer == "yes" and out.attempts == 2
    server = FaultServer(default=("ok", "no json at all"))
    with server.running():
        out = make_client(env=env_for(server)).structured("judge", MSG, Answer, use_cache=False, retries=1)
    assert not out.ok and out.raw == ["no json at all", "no json at all"]


def test_unreachable_endpoint_is_a_clear_error(make_client):
    from backends.llm.errors import EndpointUnavailable
    from backends.llm.local_server import free_port

    env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",
           "PAL_DEFAULT_MODEL": "m", "PAL_DEFAULT_MAX_RETRIES": "1"}
    with pytest.raises(EndpointUnavailable, match="cannot connect"):
        make_client(env=env).chat("assistant", MSG, use_cache=False)
