"""Provider ``fake``: scripted answers for unit tests (never offered in the app).

Give it a list of replies (strings, exceptions to raise, or callables of the request) consumed in
order, or a single callable used for every request. Every request is kept for assertions.
``window`` makes it report a context window, as a vLLM or llama.cpp endpoint does; ``slots`` how many requests it
serves at once (as the bundled server does), so independent calls fan out to it; ``latency`` seconds per answer.
``max_in_flight`` is the most requests it was answering at once. ``cut``: a reply of more words than the
request's max_tokens is cut there with finish_reason "length" (a word counts as a token), as a server cuts it
(off by default: other tests script a model that overruns a cap the client then enforces).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

from backends.llm.types import ChatRequest, ChatResult

Reply = str | Exception | Callable[[ChatRequest], str]


class ScriptedLLM:
    name = "fake"
    endpoint = "fake://scripted"

    def __init__(self, replies: Sequence[Reply] | Callable[[ChatRequest], str] = (), window: int | None = None,
                 slots: int | None = None, latency: float = 0.0, cut: bool = False):
        self.window, self._slots, self.latency, self.cut = window, slots, latency, cut
        self._replies = list(replies) if not callable(replies) else []
        self._fn = replies if callable(replies) else None
        self.requests: list[ChatRequest] = []
        self._lock = threading.Lock()
        self._in_flight = 0
        self.max_in_flight = 0

    def slots(self) -> int | None:
        return self._slots

    def __getstate__(self) -> dict:
        """Picklable (Ray ships fakes to its workers): the lock is made afresh on the other side."""
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _next(self, req: ChatRequest) -> str:
        with self._lock:
            self.requests.append(req)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.latency:
                time.sleep(self.latency)
            return self._answer(req)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, req: ChatRequest) -> str:
        if self._fn is not None:
            return self._fn(req)
        if not self._replies:
            raise AssertionError("ScriptedLLM: no scripted reply left")
        reply = self._replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply(req) if callable(reply) else reply

    def context_window(self, model: str) -> tuple[int | None, str]:
        return (self.window, "scripted") if self.window else (None, "not reported")

    def complete(self, req: ChatRequest) -> ChatResult:
        text, finish = self._next(req), "stop"
        if self.cut and req.max_tokens and len(words := text.split(" ")) > req.max_tokens:  # a word a token, as a server cuts
            text, finish = " ".join(words[:req.max_tokens]), "length"
        return ChatResult(text=text, model=req.model, tokens_in=sum(len(m.content.split()) for m in req.messages),
                          tokens_out=len(text.split()), latency_ms=0.1, finish_reason=finish)

    def stream(self, req: ChatRequest) -> Iterator[str | ChatResult]:
        result = self.complete(req)
        for word in result.text.split(" "):
            yield word + " "
        yield result
