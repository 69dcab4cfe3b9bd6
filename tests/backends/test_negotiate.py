"""Structured-mode negotiation against fake endpoints on 127.0.0.1: a json_object-only service and a strict server."""

from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from backends.llm.errors import BadRequest
from backends.llm.negotiate import effective_mode, is_format_rejection, next_mode
from backends.llm.structured import bounded_schema, strict_schema
from testkit.fake_endpoints import FakeEndpoint, strict_problem
from testkit.workspace import make_workspace


class Verdict(BaseModel):
    score: int = Field(ge=1, le=10)
    reason: str = Field(max_length=100)
    tags: list[Annotated[str, Field(max_length=20)]] = Field(default_factory=list, max_length=3)


MSG = [{"role": "user", "content": "judge this"}]


def client_for(server, home, **env):
    env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "m",
           "PAL_DEFAULT_MAX_RETRIES": "0", **env}
    return make_workspace(home, env=env).llm(session_id="neg")


def kinds(requests):
    return [(r.get("response_format") or {}).get("type") for r in requests]


def test_json_object_only_endpoint_negotiates_once_then_goes_straight(pal_home):
    with FakeEndpoint(formats=("json_object", None)).running() as server:
        client = client_for(server, pal_home)
        first = client.structured("judge", MSG, Verdict, use_cache=False)
        assert first.ok and first.mode == "json_object"
        assert kinds(server.requests) == ["json_schema", "json_object"]  # one refusal, then the working mode
        second = client.structured("assistant", MSG, Verdict, use_cache=False)  # another role, same endpoint+model
        assert second.ok and kinds(server.requests)[2:] == ["json_object"]
        # a new client (another process, another browser session) reads what was learned
        again = client_for(server, pal_home).structured("judge", MSG, Verdict, use_cache=False)
        assert again.ok and kinds(server.requests)[3:] == ["json_object"]
    caps = make_workspace(pal_home).runs.capabilities.get(server.base_url, "m")
    assert caps is not None and caps.structured_mode == "json_object"
    assert "json_schema refused" in caps.structured_note and "not supported" in caps.structured_note


def test_the_failed_attempt_is_recorded_and_the_prompt_carries_the_full_schema(pal_home):
    with FakeEndpoint(formats=("json_object", None)).running() as server:
        client = client_for(server, pal_home)
        assert client.structured("judge", MSG, Verdict, use_cache=False).ok
        working = server.requests[-1]
    assert '"maximum":10' in working["messages"][0]["content"]
    rows = client.store.calls("neg")
    assert [r["structured_mode"] for r in reversed(rows)] == ["json_schema", "json_object"]
    assert rows[1]["error"].startswith("BadRequest") and rows[0]["error"] is None


def test_strict_server_gets_a_sanitised_schema(pal_home):
    with FakeEndpoint(formats=("json_schema", "json_object", None), strict=True).running() as server:
        client = client_for(server, pal_home)
        out = client.structured("judge", MSG, Verdict, use_cache=False)
        assert out.ok and out.mode == "json_schema_strict"
        assert kinds(server.requests) == ["json_schema", "json_schema"]
        sent = server.requests[1]["response_format"]["json_schema"]
        assert sent["strict"] is True and strict_problem(sent["schema"]) is None
        assert client.structured("judge", MSG, Verdict, use_cache=False).ok
        assert len(server.requests) == 3  # straight to strict the second time


def test_prompt_only_endpoint_falls_back_to_the_prompt(pal_home):
    with FakeEndpoint(formats=(None,)).running() as server:
        out = client_for(server, pal_home).structured("judge", MSG, Verdict, use_cache=False)
        assert out.ok and out.mode == "prompt"
        assert kinds(server.requests) == ["json_schema", "json_object", None]


def test_a_remembered_mode_below_the_configured_one_wins_and_can_be_forgotten(pal_home):
    with FakeEndpoint(formats=("json_object", None)).running() as server:
        client = client_for(server, pal_home)
        client.structured("judge", MSG, Verdict, use_cache=False)
        client.modes.forget(client.provider("judge").endpoint, "m")
        client.structured("judge", MSG, Verdict, use_cache=False)
        assert kinds(server.requests) == ["json_schema", "json_object", "json_schema", "json_object"]


def test_non_format_errors_are_not_negotiated(pal_home):
    def unauthorised(body):
        return 401, {"content-type": "application/json"}, b'{"error": {"message": "bad key"}}'

    from testkit.fault_server import FaultServer

    with FaultServer(default=unauthorised).running() as server:
        client = client_for(server, pal_home)
        with pytest.raises(BadRequest, match="authentication failed"):
            client.structured("judge", MSG, Verdict, use_cache=False)
        assert len(server.requests) == 1


def test_mode_rules():
    assert effective_mode("json_schema", "json_object") == "json_object"
    assert effective_mode("prompt", "json_object") == "prompt"
    assert effective_mode("json_schema", None) == "json_schema"
    assert next_mode("json_schema", "Invalid schema for response_format 'X': 'maxLength' is not permitted") \
        == "json_schema_strict"
    assert next_mode("json_schema", "This response_format type is unavailable now") == "json_object"
    assert next_mode("json_object", "x") == "prompt" and next_mode("prompt", "x") is None
    assert is_format_rejection(BadRequest("h: request rejected (400): response_format unsupported", status=400))
    assert not is_format_rejection(BadRequest("h: request rejected (400): model not found", status=400))
    assert not is_format_rejection(BadRequest("h: authentication failed (401)", status=401))


def test_strict_schema_keeps_the_structure_and_drops_unknown_keywords():
    schema = bounded_schema(Verdict)
    strict = strict_schema(schema)
    assert strict_problem(strict) is None and strict_problem(schema) is not None
    assert strict["properties"]["score"] == {"type": "integer", "minimum": 1, "maximum": 10, "title": "Score"}
    assert strict["required"] == ["score", "reason", "tags"] and strict["properties"]["tags"]["maxItems"] == 3
