"""A fake OpenAI-compatible server with N slots, a fixed latency per call and a per-slot prompt cache — a small
stand-in for a lab's llama.cpp or vLLM server, for the throughput bench and the concurrency tests.

At most ``slots`` requests are served at once (the rest wait for a free slot, as on a real server); each takes
``latency`` seconds. A request goes to the free slot whose last prompt shares the longest prefix with its own
(llama.cpp's slot choice), and the tokens of that prefix are reported as served from the cache, in both forms
real servers use: ``usage.prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, llama.cpp) and ``timings``
(``cache_n`` / ``prompt_n`` / ``predicted_n``, llama.cpp). A token is a word or a punctuation mark of the
request's messages. Structured requests get a valid answer made up from their schema
(:mod:`testkit.schema_fill`, a function of the request alone); plain ones a sentence in the voice the request asks
for — the User-LLM's a first-person line that differs from turn to turn (:func:`testkit.requests.user_line`), any
other a varied assistant sentence — streamed when asked. So a simulation asks each call once, as its plan counts.

``GET /slots`` (each slot's ``is_processing``), ``/props`` (``total_slots``, ``n_ctx``), ``/v1/models`` and
``/metrics`` (prompt tokens processed, predicted, requests) answer like llama.cpp's. ``GET /timeline`` (the fake's
own) answers when each request since the last ``/timeline`` arrived, got its slot and gave it back (wall-clock
seconds), so a bench sees how busy the slots were over a run (:func:`timeline_figures`).
"""

from __future__ import annotations

import json
import multiprocessing
import re
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel

from backends.llm.types import ChatRequest
from testkit.fake_endpoints import schema_of
from testkit.requests import role_of, user_line
from testkit.schema_fill import schema_answer

_TOKEN = re.compile(r"\w+|[^\w\s]")
TIMELINE_KEPT = 1_000_000  # requests a timeline keeps between two reads
SIMILARITY = 0.1  # a slot is chosen for its cached prompt when they share more than this share of the prompt
PLAIN = ("Here is one idea for your week: keep the evenings free and rest.",
         "You could try a short walk after dinner; it tends to help with sleep.",
         "A simple weekly plan may be easiest to keep, with one fixed evening for yourself.",
         "One option is to book the family dinner on Sunday and keep it fixed.",
         "Would a reminder on your phone help you keep to the new routine?",
         "Cooking twice a week and freezing portions saves a lot of weekday time.",
         "A ten-minute stretch in the morning is a gentle way to start.",
         "Splitting the budget into weekly envelopes makes spending easier to see.")


def tokens(body: dict[str, Any]) -> list[str]:
    """The request's prompt as the fake counts it: role and content of every message, word by word."""
    return [t for m in body.get("messages", []) for t in [m.get("role", ""), *_TOKEN.findall(m.get("content", ""))]]


def common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def plain_answer(body: dict[str, Any]) -> str:
    """A plain (unstructured) answer in the voice ``body`` asks for: the User-LLM's turn, or an assistant's
    sentence chosen by how many assistant turns the chat holds (a different one each turn, as a model's would be;
    the same for the same request)."""
    messages = [{"role": m.get("role", "user"), "content": m.get("content") or ""} for m in body.get("messages", [])]
    req = ChatRequest(model=body.get("model") or "slot-model", messages=messages)
    if role_of(req) == "simulator":
        return user_line(req)
    turn = sum(m["role"] == "assistant" for m in messages) + sum(
        line.startswith(("Assistant:", "助手：")) for m in messages for line in m["content"].splitlines())
    first, second = turn % len(PLAIN), turn // len(PLAIN)
    return PLAIN[first] if not second else f"{PLAIN[first]} {PLAIN[(first + second) % len(PLAIN)]}"


class SlotServer:
    """See the module docstring. ``window``: the context window ``/props`` and ``/v1/models`` report."""

    def __init__(self, latency: float, slots: int, window: int = 32768, model: str = "slot-model"):
        self.latency, self.slots, self.window, self.model = latency, slots, window, model
        self._cond = threading.Condition()
        self._busy = [False] * slots
        self._last: list[list[str]] = [[] for _ in range(slots)]
        self._used_at = [0.0] * slots
        self.counters = {"requests": 0, "prompt_tokens": 0, "cached_tokens": 0, "predicted_tokens": 0}
        self._timeline: list[tuple[float, float, float]] = []  # (arrived, slot taken, slot given back) per request
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @classmethod
    def in_process(cls, latency: float, slots: int, **kw: Any) -> str:
        """Serve from a process of its own (its work is not the client's) and return its base URL."""
        parent, child = multiprocessing.Pipe()
        multiprocessing.get_context("fork").Process(target=cls._serve, args=(latency, slots, kw, child),
                                                    daemon=True).start()
        return parent.recv()

    @classmethod
    def _serve(cls, latency: float, slots: int, kw: dict[str, Any], conn: Any) -> None:
        server = cls(latency, slots, **kw)
        conn.send(server.base_url)
        server.httpd.serve_forever()

    # ------------------------------------------------------------------ slots

    def take(self, prompt: list[str]) -> tuple[int, int]:
        """(slot, cached tokens): the free slot sharing the longest prefix with ``prompt`` when that prefix is over a
        tenth of the prompt (llama.cpp's ``slot_prompt_similarity``), else the least recently used; waits while every
        slot is busy."""
        with self._cond:
            while all(self._busy):
                self._cond.wait()
            free = [i for i in range(self.slots) if not self._busy[i]]
            best = max(free, key=lambda i: (common_prefix(self._last[i], prompt), -self._used_at[i]))
            if common_prefix(self._last[best], prompt) <= SIMILARITY * len(prompt):
                best = min(free, key=lambda i: self._used_at[i])
            cached = common_prefix(self._last[best], prompt)
            self._busy[best] = True
            return best, min(cached, max(len(prompt) - 1, 0))  # the last token is always computed

    def give_back(self, slot: int, prompt: list[str], predicted: int, cached: int) -> None:
        with self._cond:
            self._busy[slot], self._last[slot], self._used_at[slot] = False, prompt, time.monotonic()
            self.counters["requests"] += 1
            self.counters["prompt_tokens"] += len(prompt) - cached
            self.counters["cached_tokens"] += cached
            self.counters["predicted_tokens"] += predicted
            self._cond.notify_all()

    def slot_states(self) -> list[dict[str, Any]]:
        with self._cond:
            return [{"id": i, "is_processing": busy, "n_ctx": self.window} for i, busy in enumerate(self._busy)]

    def timeline(self) -> list[tuple[float, float, float]]:
        """(arrived, slot taken, slot given back) of every request since the last call, in the order they ended."""
        with self._cond:
            out, self._timeline = self._timeline, []
        return out

    def metrics(self) -> str:
        c = self.counters
        return (f"llamacpp:prompt_tokens_total {c['prompt_tokens']}\n"
                f"llamacpp:tokens_predicted_total {c['predicted_tokens']}\n"
                f"llamacpp:requests_total {c['requests']}\n")

    # ------------------------------------------------------------------ answers

    def answer_text(self, body: dict[str, Any]) -> str:
        schema = schema_of(body)
        if schema is None:
            return plain_answer(body)
        fmt = body.get("response_format") or {}
        name = (fmt.get("json_schema") or {}).get("name", "")
        prompt = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
        return json.dumps(schema_answer(name, schema, prompt), ensure_ascii=False)

    def complete(self, body: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(text, usage, timings) of one chat request, after it held a slot for ``latency`` seconds."""
        arrived = time.time()
        prompt = tokens(body)
        slot, cached = self.take(prompt)
        taken = time.time()
        text = self.answer_text(body)
        predicted = len(_TOKEN.findall(text))
        try:
            time.sleep(self.latency)
        finally:
            self.give_back(slot, prompt, predicted, cached)
            with self._cond:
                if len(self._timeline) < TIMELINE_KEPT:
                    self._timeline.append((arrived, taken, time.time()))
        usage = {"prompt_tokens": len(prompt), "completion_tokens": predicted,
                 "total_tokens": len(prompt) + predicted, "prompt_tokens_details": {"cached_tokens": cached}}
        timings = {"cache_n": cached, "prompt_n": len(prompt) - cached, "predicted_n": predicted,
                   "prompt_ms": 0.0, "predicted_ms": self.latency * 1000}
        return text, usage, timings

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: Any, ctype: str = "application/json") -> None:
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/slots":
                    return self._send(200, server.slot_states())
                if self.path == "/props":
                    return self._send(200, {"total_slots": server.slots,
                                            "default_generation_settings": {"n_ctx": server.window}})
                if self.path == "/v1/models":
                    return self._send(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "max_model_len": server.window}]})
                if self.path == "/metrics":
                    return self._send(200, server.metrics(), "text/plain")
                if self.path == "/timeline":
                    return self._send(200, server.timeline())
                if self.path == "/health":
                    return self._send(200, {"status": "ok"})
                return self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if self.path == "/tokenize":
                    return self._send(200, {"tokens": list(range(len(_TOKEN.findall(body.get("content", "")))))})
                text, usage, timings = server.complete(body)
                model = body.get("model") or server.model
                if not body.get("stream"):
                    return self._send(200, {
                        "id": "s", "object": "chat.completion", "created": 0, "model": model,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": usage, "timings": timings})
                chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
                          for w in re.findall(r"\S+\s*", text)]
                chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                chunks.append({"choices": [], "usage": usage, "timings": timings})
                events = "".join(f"data: {json.dumps({'id': 's', 'object': 'chat.completion.chunk', 'model': model, **c})}\n\n"
                                 for c in chunks) + "data: [DONE]\n\n"
                self._send(200, events, "text/event-stream")

        return Handler


class TimelineFigures(BaseModel):
    """How busy an endpoint's slots were over a run, from its :meth:`SlotServer.timeline`."""

    requests: int
    span_s: float  # first arrival to last slot given back
    busy_share: float  # slot-seconds held ÷ (slots × span): 1.0 is the endpoint never idle
    mean_in_flight: float  # slots held on average over the span
    hold_ms: float  # median time a request held its slot (the latency plus the fake's own work on it)
    queued_ms: float  # median wait for a free slot at the endpoint
    tail_s: float  # the run's last stretch with fewer than half the slots held (the last units' own calls)
    gaps_s: float  # time before that tail with fewer than half the slots held


def timeline_figures(timeline: list[tuple[float, float, float]], slots: int) -> TimelineFigures:
    """The figures of ``timeline`` ((arrived, taken, given back) per request) for an endpoint of ``slots`` slots."""
    if not timeline:
        return TimelineFigures(requests=0, span_s=0.0, busy_share=0.0, mean_in_flight=0.0, hold_ms=0.0, queued_ms=0.0,
                               tail_s=0.0, gaps_s=0.0)
    start, end = min(t[0] for t in timeline), max(t[2] for t in timeline)
    span = max(end - start, 1e-9)
    held = sum(t[2] - t[1] for t in timeline)
    events = sorted([(t[1], 1) for t in timeline] + [(t[2], -1) for t in timeline])
    low: list[list[float]] = []  # stretches with fewer than half the slots held, adjacent ones merged
    in_flight, since = 0, start
    for at, step in events:
        if in_flight < slots / 2 and at > since:
            if low and low[-1][1] == since:
                low[-1][1] = at
            else:
                low.append([since, at])
        in_flight, since = in_flight + step, at
    tail = low.pop()[0] if low and low[-1][1] >= end else end
    return TimelineFigures(
        requests=len(timeline), span_s=span, busy_share=held / (slots * span), mean_in_flight=held / span,
        hold_ms=1000 * statistics.median(t[2] - t[1] for t in timeline),
        queued_ms=1000 * statistics.median(t[1] - t[0] for t in timeline),
        tail_s=end - tail, gaps_s=sum(b - a for a, b in low))
