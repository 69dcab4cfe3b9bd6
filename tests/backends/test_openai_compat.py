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


def _answering(payload: dict, stream: bool = False):
    """A FaultServer behaviour answering every chat request with ``payload`` (as SSE chunks when ``stream``)."""
    import json

    def respond(body):
        if not stream:
            return 200, {"content-type": "application/json"}, json.dumps(payload).encode()
        chunks = [{"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
                  {"choices": [], **{k: v for k, v in payload.items() if k in ("usage", "timings")}}]
        data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return 200, {"content-type": "text/event-stream"}, data.encode()

    return respond


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("usage, timings, expected", [
    ({"prompt_tokens": 194, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 181}}, None, (194, 181)),
    ({"prompt_tokens": 50, "completion_tokens": 3, "prompt_cache_hit_tokens": 32}, None, (50, 32)),  # DeepSeek
    (None, {"prompt_n": 13, "cache_n": 181, "predicted_n": 3}, (194, 181)),  # llama.cpp timings only
    ({"prompt_tokens": 50, "completion_tokens": 3}, None, (50, None)),  # the endpoint does not say
])
def test_prompt_tokens_served_from_the_endpoints_cache_are_read(usage, timings, expected, stream):
    from testkit.fault_server import FaultServer

    payload = {"id": "x", "object": "chat.completion", "model": "m",
               "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
               **({"usage": usage} if usage else {}), **({"timings": timings} if timings else {})}
    with FaultServer(default=_answering(payload, stream)).running() as srv:
        provider = OpenAICompatProvider(srv.base_url, None)
        result = list(provider.stream(_request()))[-1] if stream else provider.complete(_request())
    assert (result.tokens_in, result.tokens_cached) == expected


def test_slots_are_read_from_a_llama_cpp_servers_props():
    from testkit.fake_endpoints import FakeEndpoint
    from testkit.fault_server import FaultServer

    with FakeEndpoint(window=4096, props=True).running() as fake:
        assert OpenAICompatProvider(fake.base_url, None).slots() == 2
    with FaultServer().running() as srv:  # no /props: the server does not say
        assert OpenAICompatProvider(srv.base_url, None).slots() is None


def test_a_stream_closed_early_closes_its_connection_so_the_server_stops_generating():
    """A cancelled turn (the Simulate page's stop, a closed tab) must not leave the server decoding into a socket
    nobody reads: closing the provider's stream closes the HTTP response, and the server's next writes fail."""
    import json
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from testkit.fault_server import serving

    written: list[int] = []
    stopped = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            chunk = {"choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": None}]}
            try:
                for n in range(400):  # about 20 s of tokens, far longer than the test waits
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    written.append(n)
                    time.sleep(0.05)
            except (BrokenPipeError, ConnectionResetError):
                stopped.set()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    httpd.daemon_threads = True
    with serving(httpd):
        stream = OpenAICompatProvider(f"http://127.0.0.1:{httpd.server_address[1]}/v1", None).stream(_request())
        assert [next(stream), next(stream)] == ["word ", "word "]
        stream.close()
        assert stopped.wait(5.0), f"the server was still writing after {len(written)} chunks"
    assert len(written) < 150
