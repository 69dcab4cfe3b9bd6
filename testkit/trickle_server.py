"""A real OpenAI-compatible server on 127.0.0.1 that answers at a set speed, and may stop sending midway.

Every answer is ``tokens`` pieces sent at ``rate`` pieces per second — streamed as server-sent events when the
request asks for a stream, else one body once the last piece is made (what a server decoding at that speed
does). After ``stall_after`` pieces it sends nothing for ``stall_s`` seconds (a stalled server), then goes on.
The answer of a structured request (``response_format`` with a schema) is ``{"text": "<pieces>"}``; a plain one
the pieces themselves. Usage and llama.cpp-style ``timings`` come with the answer, and with ``slots`` set it
answers ``GET /props`` with ``total_slots`` as llama.cpp does, so the platform can measure its speed
(:mod:`backends.llm.rates`): a request with ``max_tokens`` 1 or ``ignore_eos`` is answered at once, with timings
at ``rate``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from testkit.fault_server import serving

PIECE = "ok "


class TrickleServer:
    """See the module docstring; ``requests`` keeps every chat request's body in order."""

    def __init__(self, tokens: int = 200, rate: float = 5.0, stall_after: int | None = None, stall_s: float = 0.0,
                 slots: int | None = None):
        self.tokens, self.rate, self.stall_after, self.stall_s, self.slots = tokens, rate, stall_after, stall_s, slots
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/props") and server.slots:
                    self._json({"total_slots": server.slots, "default_generation_settings": {"n_ctx": 4096}})
                else:
                    self._json({"error": {"message": "not found"}}, 404)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json({"error": {"message": "not found"}}, 404)
                    return
                with server._lock:
                    server.requests.append(body)
                if body.get("max_tokens") == 1 or body.get("ignore_eos"):
                    self._json(server.calibration(body))
                elif body.get("stream"):
                    self._stream(body)
                else:
                    text = "".join(server.pieces())
                    self._json(server.completion(body, server.answer(body, text)))

            def _json(self, data: dict[str, Any], status: int = 200) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()  # HTTP/1.0: the body ends when the connection closes
                structured = server.structured(body)
                try:
                    if structured:
                        self._event({"choices": [{"index": 0, "delta": {"content": '{"text": "'}}]})
                    for piece in server.pieces():
                        self._event({"choices": [{"index": 0, "delta": {"content": piece}}]})
                    if structured:
                        self._event({"choices": [{"index": 0, "delta": {"content": '"}'}}]})
                    self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                    self._event({"choices": [], **server.usage()})
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout): what the test is about

            def _event(self, data: dict[str, Any]) -> None:
                self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def pieces(self) -> Iterator[str]:
        """The answer's pieces, each after 1 / rate seconds, with the stall where it is set."""
        for i in range(self.tokens):
            if self.stall_after is not None and i == self.stall_after:
                time.sleep(self.stall_s)
            time.sleep(1 / self.rate)
            yield PIECE

    @staticmethod
    def structured(body: dict[str, Any]) -> bool:
        return isinstance(body.get("response_format"), dict)

    def answer(self, body: dict[str, Any], text: str) -> str:
        return json.dumps({"text": text}) if self.structured(body) else text

    def usage(self) -> dict[str, Any]:
        return {"usage": {"prompt_tokens": 20, "completion_tokens": self.tokens, "total_tokens": 20 + self.tokens},
                "timings": {"prompt_n": 20, "predicted_n": self.tokens, "predicted_ms": 1000 * self.tokens / self.rate}}

    def completion(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        return {"id": "t", "object": "chat.completion", "created": 0, "model": body.get("model", "trickle"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                **self.usage()}

    def calibration(self, body: dict[str, Any]) -> dict[str, Any]:
        """A speed measurement's request: answered at once, its timings those of this server's ``rate``."""
        n = int(body.get("max_tokens") or 1)
        prompt_n = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        return {**self.completion(body, PIECE * n),
                "timings": {"prompt_n": prompt_n, "predicted_n": n, "predicted_ms": 1000 * n / self.rate}}

    @contextmanager
    def running(self) -> Iterator[TrickleServer]:
        with serving(self.httpd):
            yield self
