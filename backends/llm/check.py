"""Connection check for a role: one chat and one bounded structured request (CLI and Settings page)."""

from __future__ import annotations

import logging
import time
from typing import Literal

from pydantic import BaseModel, Field

from backends.llm.client import LLMClient
from backends.llm.errors import LLMError
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
    reply: str = ""
    error: str | None = None

    def lines(self) -> list[str]:
        head = f"{self.role}: {self.provider} {self.endpoint} model={self.model}"
        if self.error:
            return [head, f"  FAILED: {self.error}"]
        return [
            head,
            f"  chat: {self.chat_latency_ms:.0f} ms, {self.tokens_out} tokens, {self.tokens_per_s:.1f} tokens/s",
            f"  structured: {'parsed' if self.structured_ok else 'did NOT parse'} in {self.structured_latency_ms:.0f} ms",
            f"  reply: {self.reply[:100]!r}",
        ]


def check_role(client: LLMClient, role: str) -> CheckReport:
    rc = client.config.role(role)
    report = CheckReport(role=role, provider=rc.provider, endpoint="", model=rc.model)
    try:
        provider = client.provider(role)
        chat_prompt, structured_prompt = load_prompt("platform/check_chat"), load_prompt("platform/check_structured")
        result = client.chat(role, [{"role": "user", "content": chat_prompt.render()}], prompt=chat_prompt,
                             use_cache=False, max_tokens=48)
        elapsed = result.latency_ms / 1000  # the request itself, not a local server's start-up
        report.endpoint = provider.endpoint
        report.model = result.model
        report.chat_latency_ms = elapsed * 1000
        report.tokens_out = result.tokens_out
        report.tokens_per_s = result.tokens_out / elapsed if elapsed > 0 else 0.0
        report.reply = result.text
        t0 = time.perf_counter()
        structured = client.structured(role, [{"role": "user", "content": structured_prompt.render()}], _Probe,
                                       prompt=structured_prompt, use_cache=False, retries=1, max_tokens=96)
        report.structured_latency_ms = (time.perf_counter() - t0) * 1000
        report.structured_ok = structured.ok
        report.ok = structured.ok
        if not structured.ok:
            report.error = f"structured output did not parse: {structured.errors[-1]}"
    except (LLMError, PromptError, ValueError) as e:
        report.error = client.redact(str(e))
        log.warning("connection check of role %s failed: %s", role, report.error)
    return report
