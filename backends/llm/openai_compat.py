"""Provider for any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp, DeepSeek, DashScope…).

The SDK is imported lazily and its own retries are off: :mod:`backends.llm.retry` decides when to
retry, so the policy is the same for every provider. SDK exceptions become the typed errors of
:mod:`backends.llm.errors` with messages that carry the host only, never a key.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlparse

from backends.llm.errors import (
    BadRequest,
    BadResponse,
    EndpointUnavailable,
    LLMError,
    LLMTimeout,
    RateLimited,
    ServerError,
)
from backends.llm.types import ChatRequest, ChatResult

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class OpenAICompatProvider:
    """Chat completions over HTTP with the ``openai`` client."""

    name = "openai"

    def __init__(self, base_url: str | None, api_key: str | None, timeout: float = 60.0):
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = api_key or "not-needed"
        self._timeout = timeout
        self._client: Any = None

    @property
    def endpoint(self) -> str:
        """``scheme://host:port/path`` without credentials: safe to show and to key caches on."""
        u = urlparse(self.base_url)
        host = u.hostname or ""
        return f"{u.scheme}://{host}{f':{u.port}' if u.port else ''}{u.path}"

    def _sdk(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.OpenAI(base_url=self.base_url, api_key=self._api_key, max_retries=0,
                                         timeout=self._timeout)
        return self._client

    def _kwargs(self, req: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": req.model,
            "messages": [m.model_dump() for m in req.messages],
            "temperature": req.temperature,
            "max_tokens": req.max_tokens,
            "timeout": req.timeout,
        }
        if req.seed is not None:
            kwargs["seed"] = req.seed
        if req.response_format is not None:
            kwargs["response_format"] = req.response_format
        if req.stop:
            kwargs["stop"] = req.stop
        if req.extra:
            kwargs["extra_body"] = req.extra
        return kwargs

    def complete(self, req: ChatRequest) -> ChatResult:
        started = time.perf_counter()
        try:
            resp = self._sdk().chat.completions.create(**self._kwargs(req))
        except Exception as e:  # noqa: BLE001 - every SDK error is mapped to a typed one
            raise self._translate(e) from None
        try:
            choice = resp.choices[0]
            text = choice.message.content or ""
        except (AttributeError, IndexError, TypeError):
            raise BadResponse(f"{self.endpoint}: response has no message") from None
        usage = getattr(resp, "usage", None)
        return ChatResult(
            text=text,
            model=getattr(resp, "model", None) or req.model,
            tokens_in=getattr(usage, "prompt_tokens", 0) or 0,
            tokens_out=getattr(usage, "completion_tokens", 0) or 0,
            latency_ms=(time.perf_counter() - started) * 1000,
            finish_reason=getattr(choice, "finish_reason", None),
        )

    def stream(self, req: ChatRequest) -> Iterator[str | ChatResult]:
        """Yield text deltas, then one final :class:`ChatResult` with usage."""
        started = time.perf_counter()
        parts: list[str] = []
        usage = None
        finish = None
        model = req.model
        try:
            stream = self._sdk().chat.completions.create(**self._kwargs(req), stream=True,
                                                         stream_options={"include_usage": True})
            for chunk in stream:
                model = getattr(chunk, "model", None) or model
                if getattr(chunk, "usage", None):
                    usage = chunk.usage
                for choice in chunk.choices or []:
                    delta = getattr(choice.delta, "content", None)
                    if delta:
                        parts.append(delta)
                        yield delta
                    finish = choice.finish_reason or finish
        except LLMError:
            raise
        except Exception as e:  # noqa: BLE001
            raise self._translate(e) from None
        yield ChatResult(
            text="".join(parts), model=model,
            tokens_in=getattr(usage, "prompt_tokens", 0) or 0,
            tokens_out=getattr(usage, "completion_tokens", 0) or len(parts),
            latency_ms=(time.perf_counter() - started) * 1000, finish_reason=finish,
        )

    def _translate(self, e: Exception) -> LLMError:
        import openai

        where = self.endpoint
        if isinstance(e, openai.APITimeoutError):
            return LLMTimeout(f"{where}: no answer within {self._timeout:.0f} s")
        if isinstance(e, openai.APIConnectionError):
            return EndpointUnavailable(f"{where}: cannot connect ({type(e.__cause__ or e).__name__})")
        if isinstance(e, openai.APIStatusError):
            status = e.status_code
            retry_after = parse_retry_after(e.response.headers.get("retry-after") if e.response is not None else None)
            detail = _short_detail(e)
            if status == 429:
                return RateLimited(f"{where}: rate limited (429){detail}", status=status, retry_after=retry_after)
            if status >= 500:
                return ServerError(f"{where}: server error {status}{detail}", status=status, retry_after=retry_after)
            if status in (401, 403):
                return BadRequest(f"{where}: authentication failed ({status}); check the API key setting", status=status)
            return BadRequest(f"{where}: request rejected ({status}){detail}", status=status)
        return BadResponse(f"{where}: unreadable response ({type(e).__name__})")


def _short_detail(e: Exception) -> str:
    body = getattr(e, "body", None)
    msg = body.get("message") if isinstance(body, dict) else None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        msg = body["error"].get("message")
    return f": {str(msg)[:200]}" if msg else ""
