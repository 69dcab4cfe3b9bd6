"""An OpenAI-compatible HTTP/1.1 keep-alive server on 127.0.0.1 that answers well-formed after a fixed latency.

Used by the throughput bench and by the provider's connection-reuse test; records the TCP peers it served.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LatencyServer:
    """OpenAI-compatible chat completions on 127.0.0.1, every answer well-formed after ``latency`` seconds."""

    def __init__(self, latency: float):
        self.latency = latency
        self.peers: set[tuple[str, int]] = set()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like a real endpoint
            wbufsize = 1 << 16  # headers and body in one send (flushed after each request)
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                server.peers.add(self.client_address)  # one entry per TCP connection used
                time.sleep(server.latency)
                ctype, payload = server.answer(body)
                self.send_response(200)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @classmethod
    def in_process(cls, latency: float) -> str:
        """Start the server in its own process (its CPU work is not the platform's) and return its base URL."""
        parent, child = multiprocessing.Pipe()
        multiprocessing.get_context("fork").Process(target=cls._serve, args=(latency, child), daemon=True).start()
        return parent.recv()

    @classmethod
    def _serve(cls, latency: float, conn) -> None:
        server = cls(latency)
        conn.send(server.base_url)
        server.httpd.serve_forever()

    @staticmethod
    def answer(body: dict) -> tuple[str, bytes]:
        model = body.get("model", "bench")
        if body.get("stream"):
            chunks = [{"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
                      for w in ("Here is ", "one idea ", "for your week.")]
            chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            text = "".join(f"data: {json.dumps({'id': 'b', 'object': 'chat.completion.chunk', 'created': 0, 'model': model, **c})}\n\n"
                           for c in chunks) + "data: [DONE]\n\n"
            return "text/event-stream", text.encode()
        asks_json = any("JSON" in m["content"] for m in body["messages"] if m["role"] == "system")
        content = json.dumps({"content": "I could use some help with this."}) if asks_json else "A short plan."
        return "application/json", json.dumps({
            "id": "b", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58}}).encode()
