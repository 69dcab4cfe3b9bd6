"""Records that cross the LLM boundary."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T", bound=BaseModel)
Role = Literal["system", "user", "assistant"]


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Role
    content: str


class ChatRequest(BaseModel):
    """What a provider is asked: messages plus sampling parameters and an optional JSON schema."""

    model_config = ConfigDict(extra="forbid")
    model: str
    messages: list[Message]
    temperature: float = 0.7
    max_tokens: int = 512
    timeout: float = 60.0  # seconds for the whole answer (backends.llm.deadline)
    first_token_timeout: float | None = None  # a stream: seconds without a token before it is given up (None: timeout)
    deadline_note: str | None = None  # how the timeouts were computed, for the message of a timeout
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    stop: list[str] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class ChatResult(BaseModel):
    """One answer, with what it cost. ``text`` is the answer only: a reasoning model's thinking (``<think>``
    blocks, ``reasoning_content``) is kept apart in ``reasoning`` (see :mod:`backends.llm.reasoning`)."""

    model_config = ConfigDict(extra="forbid")
    text: str
    model: str
    reasoning: str = ""
    reasoning_tokens: int = 0  # part of tokens_out when the endpoint counts it there
    reasoning_counted_by: str | None = None  # "endpoint" (usage details) or the counter's name
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int | None = None  # of tokens_in, served from the endpoint's prompt cache (None: it did not say)
    latency_ms: float = 0.0
    finish_reason: str | None = None
    cache_hit: bool = False
    attempts: int = 1


class StructuredResult(BaseModel, Generic[T]):
    """A parsed, validated structured answer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    value: T
    raw: str
    attempts: int
    repaired: bool = False
    reasoning: str = ""  # the accepted answer's thinking, never parsed
    mode: str = ""  # the structured mode that produced it (backends.llm.negotiate)
    ok: Literal[True] = True


class StructuredFailure(BaseModel):
    """The model never produced valid output: every raw text and why each was rejected."""

    raw: list[str]
    errors: list[str]
    attempts: int
    reasoning: list[str] = Field(default_factory=list)
    mode: str = ""
    ok: Literal[False] = False

    @property
    def last_raw(self) -> str:
        return self.raw[-1] if self.raw else ""
