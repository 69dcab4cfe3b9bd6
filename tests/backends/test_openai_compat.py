"""The OpenAI-compatible provider against a real keep-alive HTTP/1.1 server (bench.latency_server.LatencyServer)."""

from __future__ import annotations

import threading

import pytest

from backends.llm.openai_compat import OpenAICompatProvider
from backends.llm.types import ChatRequest, ChatResult, Message
from testkit.latency_server import LatencyServer


@pytest.fixture
def server():
    srv = LatencyServer(latency=0.0)
    thread = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def _request(text: str = "hi") -> ChatRequest:
    return ChatRequest(model="m", messages=[Message(role="user", content=text)], temperature=0.0, max_tokens=20,
                       timeout=10.0)


def test_complete_parses_text_model_and_usage(server):
    result = OpenAICompatProvider(server.base_url, None).complete(_request())
    assert result.text == "A short plan."
    assert (result.model, result.tokens_in, result.tokens_out, result.finish_reason) == ("m", 50, 8, "stop")


def test_stream_yields_deltas_then_result(server):
    parts = list(OpenAICompatProvider(server.base_url, None).stream(_request()))
    assert parts[:-1] == ["Here is ", "one idea ", "for your week."]
    assert isinstance(parts[-1], ChatResult) and parts[-1].text == "Here is one idea for your week."


def test_streamed_and_plain_calls_reuse_one_connection(server):
    """After [DONE] the rest of the body is read, so HTTP/1.1 keeps the connection for the next call."""
    provider = OpenAICompatProvider(server.base_url, None)
    for _ in range(3):
        list(provider.stream(_request()))
        provider.complete(_request())
    assert len(server.peers) == 1
