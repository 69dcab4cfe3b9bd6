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
            system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
            user_side = "chat messages that" in system  # the User-LLM (fixed mode streams its turn too)
            words = ("I could ", "use some help ", "with this.") if user_side else ("Here is ", "one idea ", "for your week.")
            chunks = [{"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]} for w in words]
            chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            text = "".join(f"data: {json.dumps({'id': 'b', 'object': 'chat.completion.chunk', 'created': 0, 'model': model, **c})}\n\n"
                           for c in chunks) + "data: [DONE]\n\n"
            return "text/event-stream", text.encode()
        asks_json = any("JSON" in m["content"] for m in body["messages"] if m["role"] == "system")
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        if schema is not None:
            content = json.dumps(minimal_instance(schema, schema))
        else:
            content = json.dumps({"content": "I could use some help with this."}) if asks_json else "A short plan."
        return "application/json", json.dumps({
            "id": "b", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58}}).encode()


SENTENCE = "I could use some help with this."


def minimal_instance(schema: dict, root: dict) -> object:
    """The smallest value that satisfies a (bounded) JSON schema: what a fake endpoint answers a structured request
    with, so every memory method's parser accepts it and a bench measures the platform, not retries."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return minimal_instance(root.get("$defs", {}).get(name, {}), root)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return minimal_instance(options[0], root)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: minimal_instance(v, root) for k, v in props.items()}
    if kind == "array":
        item = schema.get("items", {})
        return [minimal_instance(item, root) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return SENTENCE[: schema.get("maxLength", len(SENTENCE))].ljust(schema.get("minLength", 0), "x")
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return False
    return None
