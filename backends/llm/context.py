"""Context budgets: how many tokens a role's prompt may take, and the record of every cut made to fit.

A role's window is its ``context_window`` setting, else what the endpoint reports
(:mod:`backends.llm.discovery`: vLLM's ``/v1/models`` ``max_model_len``, llama.cpp's ``/props`` ``n_ctx`` —
the bundled server gives each request ``ctx / parallel`` = 4,096 tokens), else unknown (nothing is fitted).

The prompt may take ``window − max_tokens − REQUEST_OVERHEAD`` tokens (:attr:`Budget.limit`), counting
``MESSAGE_OVERHEAD`` per message for the chat template; when the counter is only an estimate,
``ESTIMATE_SLACK`` of the window is kept free as well. Callers fit their prompts by a policy of their own
(see :mod:`memory.fit`, :mod:`sim.fit`, :mod:`evaluation.faireval`) and record each :class:`Cut`.
:func:`fit_request` is the last check before a request leaves: it lowers ``max_tokens`` to what the
window leaves (never below a quarter of it, or ``MIN_ANSWER``), or raises :class:`ContextOverflow`
— a prompt is never sent to fail at the endpoint or be truncated there silently.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from backends.llm.counters import TokenCounter, counter_for
from backends.llm.errors import ContextOverflow, LLMError
from backends.llm.types import ChatRequest, Message

log = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 8  # chat-template tokens around each message (role markers, separators)
REQUEST_OVERHEAD = 40  # per request: a default system prompt some templates add, the generation prompt
ESTIMATE_SLACK = 0.10  # share of the window kept free when the counter is an estimate
MIN_ANSWER = 64


def _content(m: Message | dict[str, str]) -> str:
    return m.content if isinstance(m, Message) else str(m.get("content", ""))


@dataclass(frozen=True)
class Budget:
    """A role's window, answer length and token counter; ``limit`` is what the prompt may take."""

    role: str
    window: int | None
    window_source: str
    max_tokens: int
    counter: TokenCounter
    reserved: int = 0  # tokens the client adds to the prompt (a structured call's format instructions)

    @property
    def counter_name(self) -> str:
        return self.counter.name

    @property
    def slack(self) -> int:
        exact = getattr(self.counter, "exact", False)
        return 0 if exact or self.window is None else int(self.window * ESTIMATE_SLACK)

    @property
    def limit(self) -> int | None:
        if self.window is None:
            return None
        return self.window - self.max_tokens - REQUEST_OVERHEAD - self.slack - self.reserved

    def count(self, text: str) -> int:
        return self.counter.count(text)

    def count_messages(self, messages: Sequence[Message | dict[str, str]]) -> int:
        return sum(self.count(_content(m)) + MESSAGE_OVERHEAD for m in messages)

    def room(self, messages: Sequence[Message | dict[str, str]]) -> int | None:
        """Tokens still free for the prompt after ``messages`` (negative: over), or None without a window."""
        return None if self.limit is None else self.limit - self.count_messages(messages)

    def describe(self) -> str:
        if self.window is None:
            return f"window unknown ({self.window_source}); prompts are not fitted"
        return (f"window {self.window:,} tokens ({self.window_source}) − {self.max_tokens:,} max tokens: "
                f"prompts up to {self.limit:,} tokens, counted by {self.counter_name}")


class Cut(BaseModel):
    """One trimming of a prompt: what was left out to fit the window, and by which count."""

    what: str  # e.g. "full history", "retrieved items", "dialogue so far", "correction turns", "answer length"
    unit: str  # what ``removed`` lists: sessions, items, logs, utterances, characters, tokens
    removed: list[str]
    tokens: int  # tokens left out
    limit: int  # the budget that was met
    counter: str

    def describe(self) -> str:
        """``trimmed 4,210 tokens: sessions 1000_sample0–2``."""
        return f"trimmed {self.tokens:,} tokens: {self.unit} {compress_labels(self.removed)}".rstrip()


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compress_labels(labels: Sequence[str], most: int = 6) -> str:
    """``1000_sample0, 1000_sample1, 1000_sample2, x`` → ``1000_sample0–2, x`` (runs of consecutive numbers)."""
    groups: list[tuple[str, int, int] | str] = []
    for label in labels:
        m = _NUMBERED.match(label)
        last = groups[-1] if groups else None
        if m and isinstance(last, tuple) and last[0] == m.group(1) and int(m.group(2)) == last[2] + 1:
            groups[-1] = (last[0], last[1], int(m.group(2)))
        elif m:
            groups.append((m.group(1), int(m.group(2)), int(m.group(2))))
        else:
            groups.append(label)
    shown = [g if isinstance(g, str) else f"{g[0]}{g[1]}" + (f"–{g[2]}" if g[2] != g[1] else "") for g in groups]
    if len(shown) > most:
        shown = [*shown[: most - 1], f"and {len(shown) - most + 1} more"]
    return ", ".join(shown)


def describe_cuts(cuts: Sequence[Cut | dict[str, Any]]) -> str:
    """All cuts of one prompt on one line (records stored as dicts read back too)."""
    return "; ".join((c if isinstance(c, Cut) else Cut.model_validate(c)).describe() for c in cuts)


def resolve_window(configured: int | None, probe: Callable[[str], tuple[int | None, str]] | None,
                   model: str) -> tuple[int | None, str]:
    """(window, where it came from): the setting, else the endpoint's report, else unknown."""
    if configured:
        return configured, "configured"
    if probe is None:
        return None, "not reported"
    try:
        return probe(model)
    except (LLMError, OSError, ValueError):
        log.warning("could not read the context window of %s", model, exc_info=True)
        return None, "not reported (probe failed)"


class BudgetBook:
    """Each role's window and counter, found once per client (windows are also written to the capability store,
    where Settings and ``pal llm check`` show them)."""

    def __init__(self, config: Any, provider: Callable[[str], Any], capabilities: Any):
        self.config, self._provider, self.capabilities = config, provider, capabilities
        self._windows: dict[str, tuple[int | None, str]] = {}
        self._counters: dict[str, TokenCounter] = {}

    def window(self, role: str) -> tuple[int | None, str]:
        if role not in self._windows:
            rc, provider = self.config.role(role), self._provider(role)
            found = resolve_window(rc.context_window, getattr(provider, "context_window", None), rc.model)
            self._windows[role] = found
            if found[0] and found[1] != "configured" and self.capabilities is not None:
                self.capabilities.update(provider.endpoint, rc.model, context_window=found[0], window_source=found[1])
        return self._windows[role]

    def counter(self, role: str) -> TokenCounter:
        if role not in self._counters:
            rc, provider = self.config.role(role), self._provider(role)
            root = provider.tokenizer_root() if hasattr(provider, "tokenizer_root") else None
            self._counters[role] = counter_for(rc.tokenizer, rc.model, rc.base_url, local_root=root,
                                               local_label=provider.endpoint if root else None)
        return self._counters[role]

    def answer_tokens(self, role: str) -> int:
        """The role's answer budget: its ``max_tokens`` when set, else its own fitted to the window."""
        rc = self.config.role(role)
        return rc.max_tokens if rc.max_tokens is not None else rc.answer_budget(role, self.window(role)[0])

    def budget(self, role: str, max_tokens: int | None = None, reserved_text: str = "") -> Budget:
        window, source = self.window(role)
        counter = self.counter(role)
        reserved = counter.count(reserved_text) + MESSAGE_OVERHEAD if reserved_text else 0
        return Budget(role, window, source, max_tokens or self.answer_tokens(role), counter, reserved)


def fit_request(budget: Budget, req: ChatRequest, shrink_answer: bool = True) -> tuple[ChatRequest, int | None, str | None]:
    """(request to send, prompt tokens counted, note of a lowered max_tokens); raises :class:`ContextOverflow`."""
    if budget.window is None:
        return req, None, None
    need = budget.count_messages(req.messages) + REQUEST_OVERHEAD
    room = budget.window - need - budget.slack
    if room >= req.max_tokens:
        return req, need, None
    floor = min(req.max_tokens, max(MIN_ANSWER, req.max_tokens // 4))
    if shrink_answer and room >= floor:
        note = f"max_tokens {req.max_tokens} → {room} to fit the window of {budget.window:,}"
        return req.model_copy(update={"max_tokens": room}), need, note
    raise ContextOverflow(
        f"{budget.role}: the prompt takes {need:,} tokens ({budget.counter_name}) and the answer up to "
        f"{req.max_tokens:,}, more than the context window of {budget.window:,} tokens ({budget.window_source}); "
        "nothing was sent. Shorten the input, raise the window (context_window) or lower max_tokens.")
