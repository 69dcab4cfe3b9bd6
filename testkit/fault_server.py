"""A real OpenAI-compatible HTTP server on 127.0.0.1 that misbehaves on cue (429, 500, slow, broken JSON)."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(text: str, model: str = "fault-model") -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": len(text.split()), "total_tokens": 5}}


class FaultServer:
    """``script`` is a list of behaviours consumed one per request; when empty, ``default`` is used.

    Behaviours: ("ok", text) · ("429", retry_after or None) · ("500",) · ("slow", seconds, text) ·
    ("badjson",) · ("echo",) (answers with the last user message) · callable(body) -> (status, headers, bytes)
    """

    def __init__(self, script=(), default=("ok", "fine"), latency: float = 0.0):
        self.script = deque(script)
        self.default = default
        self.latency = latency
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []  # every request's headers (Authorization included), in order
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    action = server.script.popleft() if server.script else server.default
                if server.latency:
                    time.sleep(server.latency)
                status, headers, payload = server.respond(action, body)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def respond(self, action, body):
        js = {"content-type": "application/json"}
        if callable(action):
            return action(body)
        kind = action[0]
        if kind == "ok":
            return 200, js, json.dumps(completion(action[1], body.get("model", "m"))).encode()
        if kind == "echo":
            last = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
            return 200, js, json.dumps(completion(last, body.get("model", "m"))).encode()
        if kind == "429":
            headers = {**js, **({"retry-after": str(action[1])} if action[1] is not None else {})}
            return 429, headers, b'{"error": {"message": "slow down", "type": "rate_limit"}}'
        if kind == "500":
            return 500, js, b'{"error": {"message": "boom"}}'
        if kind == "slow":
            time.sleep(action[1])
            return 200, js, json.dumps(completion(action[2])).encode()
        if kind == "badjson":
            return 200, js, b'{"choices": [{"message": {"content": "trunc'
        raise ValueError(kind)

    @contextmanager
    def running(self):
        with serving(self.httpd):
            yield self


@contextmanager
def serving(httpd: ThreadingHTTPServer):
    """Serve ``httpd`` on a daemon thread for the ``with`` block, then shut it down and close its socket."""
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
