"""How long one call may take: a deadline from what the call needs at the endpoint's measured speed.

A fixed limit for every call is wrong both ways: a 2,048-token answer from the bundled server on a busy 2-core
machine (16–27 tokens/s with every slot busy) needs 75–130 s by construction, while a one-line answer that
has not come after a minute means something is wrong. So each call's deadline is what it needs::

    margin × (prompt tokens ÷ prompt rate + max_tokens ÷ decode rate) + grace

with both rates those of one request while every slot of the server is busy (:mod:`backends.llm.rates` measures
and remembers them per endpoint and model). An endpoint nobody measured gets :data:`ASSUMED_RATES` (slow on
purpose: a deadline too long costs a wait, one too short loses the work). A ``timeout`` the person configured
wins for the whole answer. A streamed call is bounded by ``idle_timeout`` seconds without a token instead (a stalled
server, told apart from a slow one), never by its total time; its first token may take as long as the prompt needs,
when that is longer.

The :class:`Deadline` says how it was computed, so the error a timeout raises can name the numbers.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MARGIN = 1.5  # the computed need × this: rates drift with the machine's load
GRACE_S = 15.0  # plus this: connection, queueing in the server, the first batch
PATIENT_FACTOR = 2.0  # the longer deadline of the one retry a timed-out piece of work gets


class Rates(BaseModel):
    """Tokens per second of one request while every slot of the endpoint is busy."""

    model_config = ConfigDict(extra="forbid")
    prompt: float = Field(gt=0)  # prompt tokens processed per second
    decode: float = Field(gt=0)  # answer tokens per second
    slots: int = Field(1, ge=1)  # requests served at once when measured
    source: str  # "measured 2026-12-06 01:50 with 2 slots busy", "assumed: …"

    def describe(self) -> str:
        return f"prompt {self.prompt:.0f} tok/s, decode {self.decode:.1f} tok/s ({self.source})"


# An endpoint whose speed nobody measured: a slow CPU server's, so its deadlines are long rather than short.
ASSUMED_RATES = Rates(prompt=50.0, decode=8.0, slots=1, source="assumed; no measured speed for this endpoint")


class Deadline(BaseModel):
    """Seconds a call may take in all (``total``), between two streamed tokens (``idle``) and before the first
    token of a stream (``first``), with how they were computed (``how``: named in a timeout's message)."""

    model_config = ConfigDict(extra="forbid")
    total: float = Field(gt=0)
    idle: float = Field(gt=0)
    first: float = Field(gt=0)
    how: str


def need_seconds(prompt_tokens: int, max_tokens: int, rates: Rates) -> tuple[float, float]:
    """(seconds for the prompt, seconds for ``max_tokens`` of answer) at ``rates``."""
    return prompt_tokens / rates.prompt, max_tokens / rates.decode


def call_deadline(*, prompt_tokens: int, max_tokens: int, rates: Rates, idle: float,
                  configured: float | None = None, factor: float = 1.0) -> Deadline:
    """The deadline of one call (see the module docstring); ``configured`` (the role's ``timeout``) wins for the
    total, ``factor`` lengthens every part but the idle limit (the one retry of timed-out work)."""
    prompt_s, answer_s = need_seconds(prompt_tokens, max_tokens, rates)
    longer = f", ×{factor:g} for a second try" if factor != 1.0 else ""
    if configured is not None:
        total = configured * factor
        how = f"the configured timeout of {configured:g} s{longer}"
    else:
        total = (MARGIN * (prompt_s + answer_s) + GRACE_S) * factor
        how = (f"{prompt_tokens:,} prompt tokens and up to {max_tokens:,} answer tokens at {rates.describe()}, "
               f"×{MARGIN:g} + {GRACE_S:g} s{longer}")
    first = min(max(idle, MARGIN * prompt_s * factor), total)  # a stream's first token waits for the prompt
    return Deadline(total=round(total, 1), idle=idle, first=round(first, 1), how=how)
