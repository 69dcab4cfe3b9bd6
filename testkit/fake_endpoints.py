"""Fake OpenAI-compatible endpoints on 127.0.0.1 that behave like the ones labs use, for negotiation,
reasoning and window tests: a json_object-only service, a strict-schema server, a reasoning model that
thinks in ``<think>`` tags and/or ``reasoning_content`` (streamed and not), and ``/v1/models`` / ``/props``
/ ``/tokenize`` like vLLM and llama.cpp. Structured answers are made up from the schema the request
carries (``response_format`` or the schema in the prompt), so any caller's schema gets a valid instance.
"""

from __future__ import annotations

import json
import re
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from testkit.fault_server import serving

LEAK = "THOUGHT-LEAK"
THOUGHT = f'Let me think. Maybe {{"content": "{LEAK}", "query": "{LEAK}"}} would do. {LEAK}'
STRICT_OK = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
             "description", "title", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
             "multipleOf", "minItems", "maxItems"}


def instance(schema: dict[str, Any], text: str = "a sample answer") -> Any:
    """A minimal valid value of a (bounded, ref-free) JSON schema."""
    if "anyOf" in schema:
        return instance(next(s for s in schema["anyOf"] if s.get("type") != "null"), text)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        return {k: instance(v, text) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        n = max(1, schema.get("minItems", 1))
        return [instance(schema.get("items", {}), text) for _ in range(min(n, schema.get("maxItems", n)))]
    if kind == "integer" or kind == "number":
        return max(schema.get("minimum", 1), min(schema.get("maximum", 5), 5))
    if kind == "boolean":
        return False
    low, high = schema.get("minLength", 0), schema.get("maxLength", 200)
    return (text * (1 + low // max(len(text), 1)))[: max(low, min(high, len(text)))]


def strict_problem(schema: Any, where: str = "") -> str | None:
    """What OpenAI's strict mode would say about ``schema`` (None: accepted)."""
    if not isinstance(schema, dict):
        return None
    for key in schema:
        if key not in STRICT_OK:
            return f"In context=({where or '()'}), '{key}' is not permitted."
    if schema.get("type") == "object":
        if schema.get("additionalProperties") is not False:
            return f"In context=({where or '()'}), 'additionalProperties' is required to be supplied and to be false."
        if set(schema.get("required", [])) != set(schema.get("properties", {})):
            return f"In context=({where or '()'}), 'required' is required to include every property."
    for name, sub in schema.get("properties", {}).items():
        if problem := strict_problem(sub, f"{where}'properties', '{name}'"):
            return problem
    if isinstance(schema.get("items"), dict):
        return strict_problem(schema["items"], f"{where}'items'")
    for sub in schema.get("anyOf", []):
        if problem := strict_problem(sub, f"{where}'anyOf'"):
            return problem
    return None


def schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    for m in body.get("messages", []):
        if "JSON schema:\n" in m["content"]:
            return json.loads(m["content"].split("JSON schema:\n", 1)[1].strip())
    return None


class FakeEndpoint:
    """``formats``: response_format types accepted (``None`` = no response_format); ``strict``: reject schema
    keywords a strict server does not know; ``think``: "" / "content" / "field" / "both" / "headless"
    (content starting inside the thinking, closing tag only); ``window``: reported by ``/v1/models``
    (``max_model_len``) unless ``props`` is set, then by ``/props`` (``n_ctx``)."""

    def __init__(self, formats=("json_schema", "json_object", None), strict=False, think="", window=None, props=False,
                 model="fake-model", plain="a plain answer", latency=0.0):
        self.formats, self.strict, self.think, self.window, self.props = set(formats), strict, think, window, props
        self.latency = latency  # seconds per chat request, like a remote endpoint
        self.model, self.plain = model, plain
        self.requests: list[dict[str, Any]] = []
        self.tokenize_calls = 0
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    # ------------------------------------------------------------------ HTTP

    def _handler(self):
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, payload, ctype="application/json"):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models" and endpoint.window and not endpoint.props:
                    return self._send(200, {"object": "list", "data": [
                        {"id": endpoint.model, "object": "model", "max_model_len": endpoint.window}]})
                if self.path == "/v1/models":
                    return self._send(200, {"object": "list", "data": [{"id": endpoint.model, "object": "model"}]})
                if self.path == "/props" and endpoint.props and endpoint.window:
                    return self._send(200, {"default_generation_settings": {"n_ctx": endpoint.window}, "total_slots": 2})
                return self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if self.path == "/tokenize":
                    with endpoint._lock:
                        endpoint.tokenize_calls += 1
                    return self._send(200, {"tokens": list(range(len(re.findall(r"\w+|[^\w\s]", body["content"]))))})
                with endpoint._lock:
                    endpoint.requests.append(body)
                if endpoint.latency:
                    time.sleep(endpoint.latency)
                status, payload = endpoint.answer(body)
                if status != 200 or not body.get("stream"):
                    return self._send(status, payload)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for chunk in endpoint.chunks(payload):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

        return Handler

    # ------------------------------------------------------------------ behaviour

    def refusal(self, body: dict[str, Any]) -> str | None:
        fmt = body.get("response_format")
        kind = fmt.get("type") if fmt else None
        if kind not in self.formats:
            return f"response_format type '{kind}' is not supported by this model; use 'json_object'"
        if self.strict and kind == "json_schema":
            spec = fmt["json_schema"]
            problem = strict_problem(spec.get("schema", {}))
            if problem:
                return f"Invalid schema for response_format '{spec.get('name')}': {problem}"
        return None

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if problem := self.refusal(body):
            return 400, {"error": {"message": problem, "type": "invalid_request_error", "param": "response_format"}}
        schema = schema_of(body)
        text = json.dumps(instance(schema)) if schema else self.plain
        reasoning = None
        if self.think in ("content", "both"):
            text = f"<think>{THOUGHT}</think>\n\n{text}"
        if self.think == "headless":
            text = f"{THOUGHT}</think>\n{text}"
        if self.think in ("field", "both"):
            reasoning = THOUGHT
        message = {"role": "assistant", "content": text, **({"reasoning_content": reasoning} if reasoning else {})}
        return 200, {"id": "x", "object": "chat.completion", "model": self.model,
                     "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                     "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in body["messages"]),
                               "completion_tokens": len(text.split()) + len((reasoning or "").split()),
                               "completion_tokens_details": {"reasoning_tokens": len((reasoning or "").split())}}}

    def chunks(self, payload: dict[str, Any]):
        """The answer as SSE chunks of 3 characters (tags cut mid-way), reasoning deltas first."""
        msg = payload["choices"][0]["message"]

        def chunk(delta, finish=None):
            return {"id": "x", "object": "chat.completion.chunk", "model": self.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        for field in ("reasoning_content", "content"):
            value = msg.get(field) or ""
            for i in range(0, len(value), 3):
                yield chunk({field: value[i:i + 3]})
        yield chunk({}, "stop")
        yield {"id": "x", "object": "chat.completion.chunk", "model": self.model, "choices": [],
               "usage": payload["usage"]}

    def structured_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if schema_of(r) is not None or r.get("response_format")]

    @contextmanager
    def running(self):
        with serving(self.httpd):
            yield self
