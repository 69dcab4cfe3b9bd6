"""Connection check for a role (CLI ``pal llm check`` and the Settings page).

One chat and one structured request (negotiated as every structured call is), then what the endpoint can do:
its context window and where it was read, which structured modes work, streaming, whether ``seed`` is
honoured, whether the model emits reasoning (kept apart). What was found is saved with the endpoint's
capabilities in the run store, where Settings shows it.
"""

from __future__ import annotations

import logging
import time
from typing import Literal

from pydantic import BaseModel, Field

from backends.llm import probes
from backends.llm.client import LLMClient
from backends.llm.errors import LLMError
from backends.llm.reasoning import thinking_off_body
from backends.prompts import PromptError, load_prompt

log = logging.getLogger(__name__)


class _Probe(BaseModel):
    """A tiny bounded schema every model can fill."""

    city: str = Field(max_length=40)
    country: str = Field(max_length=40)
    continent: Literal["Africa", "Asia", "Europe", "North America", "South America", "Oceania", "Antarctica"]


class CheckReport(BaseModel):
    role: str
    provider: str
    endpoint: str
    model: str
    ok: bool = False
    chat_latency_ms: float | None = None
    tokens_out: int | None = None
    tokens_per_s: float | None = None
    structured_ok: bool | None = None
    structured_latency_ms: float | None = None
    structured_mode: str | None = None  # the mode structured calls use after negotiation
    modes: dict[str, str] = Field(default_factory=dict)  # each mode tried alone: ok / refused / did not parse
    context_window: int | None = None
    window_source: str = ""
    counter: str = ""
    streaming: bool | None = None
    stream_first_ms: float | None = None
    stream_note: str = ""
    seed: str | None = None
    seed_note: str = ""
    reasoning_tokens: int | None = None  # None: the model emitted no reasoning
    thinking_switch: str | None = None  # sent because the role has thinking off
    reply: str = ""
    error: str | None = None

    def lines(self) -> list[str]:
        head = f"{self.role}: {self.provider} {self.endpoint} model={self.model}"
        if self.error:
            return [head, f"  FAILED: {self.error}"]
        window = (f"{self.context_window:,} tokens ({self.window_source})" if self.context_window
                  else f"unknown ({self.window_source}): set context_window")
        modes = "".join(f"\n    {m}: {v}" for m, v in self.modes.items())
        stream = (f"yes, first delta after {self.stream_first_ms:.0f} ms" if self.streaming and self.stream_first_ms
                  else f"no ({self.stream_note})")
        reasoning = (f"emitted ({self.reasoning_tokens} tokens, kept apart from the answer)"
                     if self.reasoning_tokens is not None else "none seen")
        if self.thinking_switch:
            reasoning += f"; thinking off sends {self.thinking_switch}"
        lines = [
            head,
            f"  chat: {self.chat_latency_ms:.0f} ms, {self.tokens_out} tokens, {self.tokens_per_s:.1f} tokens/s",
            f"  structured: {'parsed' if self.structured_ok else 'did NOT parse'} in {self.structured_latency_ms:.0f} ms"
            f" with {self.structured_mode}",
            f"  context window: {window}; tokens counted by {self.counter}",
            f"  reasoning: {reasoning}",
        ]
        if self.modes:
            lines[4:4] = [f"  structured modes:{modes}", f"  streaming: {stream}",
                          f"  seed: {self.seed or 'not tested'} ({self.seed_note})"]
        return [*lines, f"  reply: {self.reply[:100]!r}"]


def check_role(client: LLMClient, role: str, capabilities: bool = True) -> CheckReport:
    """Check ``role``; ``capabilities=False`` stops after the chat and the structured call."""
    rc = client.config.role(role)
    report = CheckReport(role=role, provider=rc.provider, endpoint="", model=rc.model)
    try:
        provider = client.provider(role)
        chat_prompt, structured_prompt = load_prompt("platform/check_chat"), load_prompt("platform/check_structured")
        chat_msgs = [{"role": "user", "content": chat_prompt.render()}]
        result = client.chat(role, chat_msgs, prompt=chat_prompt, use_cache=False, max_tokens=48)
        elapsed = result.latency_ms / 1000  # the request itself, not a local server's start-up
        report.endpoint = provider.endpoint
        report.model = result.model
        report.chat_latency_ms = elapsed * 1000
        report.tokens_out = result.tokens_out
        report.tokens_per_s = result.tokens_out / elapsed if elapsed > 0 else 0.0
        report.reply = result.text
        report.reasoning_tokens = result.reasoning_tokens if result.reasoning else None
        structured_msgs = [{"role": "user", "content": structured_prompt.render()}]
        t0 = time.perf_counter()
        structured = client.structured(role, structured_msgs, _Probe, prompt=structured_prompt, use_cache=False,
                                       retries=1, max_tokens=96)
        report.structured_latency_ms = (time.perf_counter() - t0) * 1000
        report.structured_ok, report.structured_mode = structured.ok, structured.mode
        if report.reasoning_tokens is None and structured.ok and structured.reasoning:
            report.reasoning_tokens = client.budget(role).count(structured.reasoning)
        report.ok = structured.ok
        if not structured.ok:
            report.error = f"structured output did not parse: {structured.errors[-1]}"
            return report
        budget = client.budget(role)
        report.context_window, report.window_source, report.counter = budget.window, budget.window_source, \
            budget.counter_name
        if rc.thinking == "off":
            report.thinking_switch = thinking_off_body(rc.model, rc.base_url, rc.thinking_switch)[1]
        if capabilities:
            _capabilities(client, role, report, chat_msgs, structured_msgs, structured_prompt)
    except (LLMError, PromptError, ValueError) as e:
        report.error = client.redact(str(e))
        log.warning("connection check of role %s failed: %s", role, report.error)
    return report


def _capabilities(client: LLMClient, role: str, report: CheckReport, chat_msgs, structured_msgs, prompt) -> None:
    report.modes = probes.probe_modes(client, role, structured_msgs, _Probe, prompt)
    report.streaming, report.stream_first_ms, report.stream_note = probes.probe_stream(client, role, chat_msgs)
    report.seed, report.seed_note = probes.probe_seed(client, role)
    client.store.capabilities.update(
        report.endpoint, client.config.role(role).model, modes=report.modes, streaming=report.streaming,
        seed_honoured=None if report.seed in (None, "unclear") else report.seed == "honoured",
        emits_reasoning=report.reasoning_tokens is not None, checked_at=time.time(),
        **({"context_window": report.context_window, "window_source": report.window_source}
           if report.context_window else {}))
