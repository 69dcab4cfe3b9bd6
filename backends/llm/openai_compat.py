"""Provider for any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp, DeepSeek, DashScope…).

Requests go out through the process's one keep-alive pool per endpoint (:mod:`backends.llm.http`: plain JSON
bodies and answers, server-sent events parsed line by line), which costs a fraction of the CPU the OpenAI SDK's
stack spent per call. An endpoint behind a proxy (``HTTPS_PROXY``…) goes through the SDK's low-level ``post``
instead, which honours the proxy settings; the SDK is imported only then, with its own retries off. Either way
:mod:`backends.llm.retry` decides when to retry, so the policy is the same for every provider, and failures become
the typed errors of :mod:`backends.llm.errors` with messages that carry the host only, never a key.

Each request carries its deadline (:mod:`backends.llm.deadline`): a non-streamed answer must come within
``timeout``; a streamed one ends only when no token came for ``first_token_timeout`` (the idle limit, or the time
its prompt needs when that is longer): a server that keeps sending is slow, not stalled, however long it takes (a
machine's speed drifts many-fold with its load, so a total bound from measured rates would end live answers). A timeout's message names the limit
and how it was computed (``deadline_note``).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse

from backends.llm import http
from backends.llm.counters import server_root
from backends.llm.deadline import Rates
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

log = logging.getLogger(__name__)

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


_SDK_CLIENTS: dict[tuple[str, str, float], Any] = {}
_SDK_LOCK = threading.Lock()


def _shared_sdk(base_url: str, api_key: str, timeout: float) -> Any:
    """The process's one SDK client for this endpoint, key and timeout: one connection pool kept alive and one SSL
    context for every provider a workspace, view or job unit makes (each new client built its own SSL context,
    tens of milliseconds of CPU, and opened new connections)."""
    key = (base_url, api_key, timeout)
    with _SDK_LOCK:
        if key not in _SDK_CLIENTS:
            import openai

            _SDK_CLIENTS[key] = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)
        return _SDK_CLIENTS[key]


class OpenAICompatProvider:
    """Chat completions over HTTP with the ``openai`` client."""

    name = "openai"

    def __init__(self, base_url: str | None, api_key: str | None, timeout: float = 60.0):
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = api_key or "not-needed"
        self._timeout = timeout
        self._client: Any = None
        self._pool: http.Pool | None = None
        self._direct = http.direct(self.base_url)

    @functools.cached_property
    def endpoint(self) -> str:
        """``scheme://host:port/path`` without credentials: safe to show and to key caches on (worked out once:
        every call asks for it several times)."""
        u = urlparse(self.base_url)
        host = u.hostname or ""
        return f"{u.scheme}://{host}{f':{u.port}' if u.port else ''}{u.path}"

    def context_window(self, model: str) -> tuple[int | None, str]:
        """Tokens per request as the endpoint reports them (see :mod:`backends.llm.discovery`)."""
        from backends.llm.discovery import probe_window

        key = self._api_key if self._api_key != "not-needed" else None
        return probe_window(self.base_url, model, key, timeout=min(self._timeout, 10.0))

    def slots(self) -> int | None:
        """Requests the server serves at once when it says (llama.cpp's ``/props``; asked once per process)."""
        return _slots(self.base_url, self._api_key if self._api_key != "not-needed" else None,
                      min(self._timeout, 5.0))

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (sent to a Ray worker) without the process's connections: the worker opens its own."""
        return {**self.__dict__, "_client": None, "_pool": None}

    def _http(self) -> http.Pool:
        """The process's pool of connections to this endpoint with this key."""
        if self._pool is None:
            self._pool = http.pool_for(self.base_url, self._api_key)
        return self._pool

    def _sdk(self) -> Any:
        if self._client is None:
            self._client = _shared_sdk(self.base_url, self._api_key, self._timeout)
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

    def _post(self, req: ChatRequest, stream: bool) -> Any:
        """The answer's JSON, or an iterator over a stream's chunks."""
        body = self._kwargs(req)
        timeout = body.pop("timeout")
        body.update(body.pop("extra_body", {}))
        if self._direct:
            if not stream:
                return self._http().post_json("/chat/completions", body, timeout)
            body.update(stream=True, stream_options={"include_usage": True})
            return self._http().post_events("/chat/completions", body, req.first_token_timeout or timeout)
        sdk = self._sdk()
        if not stream:
            return sdk.post("/chat/completions", body=body, cast_to=object, options={"timeout": _limits(timeout)})
        body.update(stream=True, stream_options={"include_usage": True})
        between = req.first_token_timeout or timeout  # between two chunks: the idle limit (see the module docstring)
        return sdk.post("/chat/completions", body=body, cast_to=object, options={"timeout": _limits(between)},
                        stream=True, stream_cls=_draining_stream_class())

    def complete(self, req: ChatRequest) -> ChatResult:
        started = time.perf_counter()
        try:
            resp = self._post(req, stream=False)
        except Exception as e:  # every transport or SDK error is mapped to a typed one (key-free message)
            log.debug("%s: request failed", self.endpoint, exc_info=True)
            raise self._translate(e, req) from None
        try:
            choice = resp["choices"][0]
            text = choice["message"].get("content") or ""
            reasoning = _reasoning_field(choice["message"])
        except (KeyError, IndexError, TypeError, AttributeError):
            raise BadResponse(f"{self.endpoint}: response has no message") from None
        usage = resp.get("usage") or {}
        return ChatResult(
            text=text,
            reasoning=reasoning,
            **_reasoning_usage(usage),
            **prompt_usage(usage, resp.get("timings")),
            model=resp.get("model") or req.model,
            tokens_out=usage.get("completion_tokens") or 0,
            latency_ms=(time.perf_counter() - started) * 1000,
            finish_reason=choice.get("finish_reason"),
        )

    def stream(self, req: ChatRequest) -> Iterator[str | ChatResult]:
        """Yield text deltas, then one final :class:`ChatResult` with usage."""
        started = time.perf_counter()
        parts: list[str] = []
        thoughts: list[str] = []
        usage: dict = {}
        timings: dict | None = None
        finish = None
        model = req.model
        response = None
        chunks = 0  # every chunk, a reasoning model's thinking included: what tells a stall from a slow answer
        try:
            response = self._post(req, stream=True)
            for chunk in response:
                chunks += 1
                if not isinstance(chunk, dict):
                    raise BadResponse(f"{self.endpoint}: unreadable stream chunk")
                model = chunk.get("model") or model
                usage = chunk.get("usage") or usage
                timings = chunk.get("timings") or timings  # llama.cpp: with the last chunk
                for choice in chunk.get("choices") or []:
                    thoughts.append(_reasoning_field(choice.get("delta") or {}))
                    delta = (choice.get("delta") or {}).get("content")
                    if delta:
                        parts.append(delta)
                        yield delta
                    finish = choice.get("finish_reason") or finish
        except LLMError:
            raise
        except Exception as e:  # every transport or SDK error is mapped to a typed one (key-free message)
            log.debug("%s: request failed", self.endpoint, exc_info=True)
            raise self._translate(e, req, streamed=chunks) from None
        finally:  # also when the caller stops reading (a cancelled turn): the server sees the connection close and
            if response is not None:  # stops decoding, instead of writing on until the response is collected
                response.close()  # a generator's or the SDK stream's close
        yield ChatResult(
            text="".join(parts), model=model, reasoning="".join(thoughts), **_reasoning_usage(usage),
            **prompt_usage(usage, timings),
            tokens_out=usage.get("completion_tokens") or len(parts),
            latency_ms=(time.perf_counter() - started) * 1000, finish_reason=finish,
        )

    def complete_streamed(self, req: ChatRequest) -> ChatResult:
        """:meth:`complete` read as a stream: the same result, but a stalled server is told from a slow one (the
        idle limit applies between tokens, not to the whole answer)."""
        final: ChatResult | None = None
        for chunk in self.stream(req):
            if isinstance(chunk, ChatResult):
                final = chunk
        if final is None:
            raise BadResponse(f"{self.endpoint}: the stream ended without a result")
        return final

    def measure_server_rates(self, model: str) -> Rates | None:
        """The speed of a llama.cpp server (one that says its slots in ``/props``) with every slot busy; None for
        other endpoints (measuring a hosted API would spend the account's tokens). Only when asked
        (:meth:`backends.llm.rates.RateBook.measure`): a lab's shared server is not sent calibration requests
        unasked."""
        slots = self.slots()
        if not slots:
            return None
        from backends.llm.rates import measure_llamacpp

        return measure_llamacpp(server_root(self.base_url), model, slots)

    def _translate(self, e: Exception, req: ChatRequest | None = None, streamed: int | None = None) -> LLMError:
        if isinstance(e, http.TransportError):
            return self._translate_http(e, req, streamed)
        import openai

        where = self.endpoint
        if isinstance(e, openai.APITimeoutError):
            return LLMTimeout(timeout_message(where, req, streamed, self._timeout))
        if isinstance(e, openai.APIConnectionError):
            return EndpointUnavailable(f"{where}: cannot connect ({type(e.__cause__ or e).__name__})")
        if isinstance(e, openai.APIStatusError):
            return status_error(where, e.status_code,
                                e.response.headers.get("retry-after") if e.response is not None else None,
                                _detail_of(getattr(e, "body", None)))
        return BadResponse(f"{where}: unreadable response ({type(e).__name__})")


    def _translate_http(self, e: http.TransportError, req: ChatRequest | None, streamed: int | None) -> LLMError:
        """A failure of the direct path as the typed error the SDK's would have become."""
        where = self.endpoint
        if isinstance(e, http.Timeout):
            return LLMTimeout(timeout_message(where, req, streamed, self._timeout))
        if isinstance(e, http.ConnectFailed | http.Dropped):
            return EndpointUnavailable(f"{where}: cannot connect ({e})")
        if isinstance(e, http.StatusError):
            return status_error(where, e.status, e.headers.get("retry-after"), _detail_of(e.json()))
        return BadResponse(f"{where}: unreadable response ({e})")


def status_error(where: str, status: int, retry_after_header: str | None, detail: str) -> LLMError:
    """The typed error of an HTTP error status (429: rate limited, 5xx: server error, else a rejected request)."""
    retry_after = parse_retry_after(retry_after_header)
    if status == 429:
        return RateLimited(f"{where}: rate limited (429){detail}", status=status, retry_after=retry_after)
    if status >= 500:
        return ServerError(f"{where}: server error {status}{detail}", status=status, retry_after=retry_after)
    if status in (401, 403):
        return BadRequest(f"{where}: authentication failed ({status}); check the API key setting", status=status)
    return BadRequest(f"{where}: request rejected ({status}){detail}", status=status)


_WHAT_TO_CHANGE = ("Set the role's timeout (whole answer) or idle_timeout (between tokens), e.g. "
                   "PAL_DEFAULT_TIMEOUT / PAL_DEFAULT_IDLE_TIMEOUT, to change it.")


def timeout_message(where: str, req: ChatRequest | None, streamed: int | None, fallback: float) -> str:
    """What ran out, and how the limit was computed: the whole answer of a non-streamed call, the first token of
    a stream, or the gap between two of its tokens."""
    note = f" ({req.deadline_note})" if req is not None and req.deadline_note else ""
    if req is None:
        return f"{where}: no answer within {fallback:.0f} s. {_WHAT_TO_CHANGE}"
    if streamed is None:
        return f"{where}: no answer within {req.timeout:.0f} s{note}. {_WHAT_TO_CHANGE}"
    limit = req.first_token_timeout or req.timeout
    if streamed == 0:
        return (f"{where}: no first token within {limit:.0f} s (the idle limit, or what the prompt needs when "
                f"longer){note}; the server may be stalled. {_WHAT_TO_CHANGE}")
    return (f"{where}: the server stalled: no token for {limit:.0f} s after {streamed} parts of the answer "
            f"(idle limit){note}. {_WHAT_TO_CHANGE}")


def _limits(seconds: float) -> Any:
    """The SDK's timeouts: ``seconds`` to read (an answer, or the next chunk of a stream), at most 10 s to connect."""
    import httpx2

    return httpx2.Timeout(seconds, connect=min(10.0, seconds))


_DRAINING_STREAM: Any = None


def _draining_stream_class() -> Any:
    """The SDK's ``Stream`` reading the body to its end after ``[DONE]``.

    The synchronous ``Stream`` stops reading at ``[DONE]`` and closes the response, so HTTP/1.1
    drops the connection and every streamed call opened a new one (a new TLS handshake on remote
    endpoints). Reading the few remaining bytes returns the connection to the pool instead.
    """
    global _DRAINING_STREAM
    if _DRAINING_STREAM is None:
        import httpx2
        import openai

        class DrainingStream(openai.Stream[object]):
            def _iter_events(self):
                chunks = self.response.iter_bytes()
                try:
                    for sse in self._decoder.iter_bytes(chunks):
                        if sse.data.startswith("[DONE]"):
                            for _ in chunks:
                                pass
                        yield sse
                except httpx2.TimeoutException as err:
                    raise openai.APITimeoutError(request=self.response.request) from err
                except httpx2.TransportError as err:
                    raise openai.APIConnectionError(request=self.response.request) from err

        _DRAINING_STREAM = DrainingStream
    return _DRAINING_STREAM


@lru_cache(maxsize=64)
def _slots(base_url: str, api_key: str | None, timeout: float) -> int | None:
    from backends.llm.discovery import probe_slots

    return probe_slots(base_url, api_key, timeout)


def _reasoning_field(message: dict) -> str:
    """Thinking sent apart from the content: ``reasoning_content`` (DeepSeek, vLLM, SGLang) or ``reasoning``."""
    value = message.get("reasoning_content") or message.get("reasoning") or ""
    return value if isinstance(value, str) else ""


def _reasoning_usage(usage: dict) -> dict[str, Any]:
    """Reasoning tokens when the endpoint counts them (``completion_tokens_details.reasoning_tokens``)."""
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    n = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return {"reasoning_tokens": n, "reasoning_counted_by": "endpoint"} if isinstance(n, int) and n > 0 else {}


def prompt_usage(usage: dict, timings: object = None) -> dict[str, Any]:
    """``tokens_in`` and, where the endpoint says, ``tokens_cached`` (the prompt tokens its prompt cache served):
    ``usage.prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, SGLang, llama.cpp), ``usage.prompt_cache_hit_tokens``
    (DeepSeek) or llama.cpp's ``timings.cache_n``; without ``usage``, llama.cpp's ``timings`` give both."""
    out: dict[str, Any] = {"tokens_in": usage.get("prompt_tokens") or 0}
    details = usage.get("prompt_tokens_details")
    timed = timings if isinstance(timings, dict) else {}
    for cached in (details.get("cached_tokens") if isinstance(details, dict) else None,
                   usage.get("prompt_cache_hit_tokens"), timed.get("cache_n")):
        if isinstance(cached, int) and cached >= 0:
            out["tokens_cached"] = cached
            break
    if not out["tokens_in"] and isinstance(timed.get("prompt_n"), int):
        out["tokens_in"] = timed["prompt_n"] + out.get("tokens_cached", 0)
    return out


def _detail_of(body: object) -> str:
    """The error message an endpoint put in its body (``{"error": {"message": …}}`` or ``{"message": …}``)."""
    msg = body.get("message") if isinstance(body, dict) else None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        msg = body["error"].get("message")
    return f": {str(msg)[:200]}" if msg else ""
