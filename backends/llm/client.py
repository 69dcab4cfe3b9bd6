"""The one entry point for LLM calls: ``LLMClient.chat / stream / structured`` by role.

Every call goes through the same steps — resolve the role's provider, look up the response cache,
check the prompt against the role's context window (:mod:`backends.llm.context`), call with bounded
retries, keep a reasoning model's thinking apart from the answer (:mod:`backends.llm.reasoning`),
record the call in the run store (role, model, prompt name+version, tokens and who counted them, the prompt tokens
the endpoint served from its prompt cache, reasoning tokens, latency, cache hit, error), and redact configured keys
from anything that leaves.
Structured calls negotiate the endpoint's structured mode (:mod:`backends.llm.negotiate`,
:mod:`backends.llm.structured_call`).

Clients are built by the composition root (:meth:`studio.workspace.Workspace.llm`). A client's
``session_id`` and ``run_id`` never change after construction: work that must be accounted to a run
(a memory build, a simulation, a generation) takes its own view with :meth:`LLMClient.for_run`, which
shares providers, connections, store and cache with its parent — so two builders and a simulation in
one browser session each record their calls under their own run id.

Independent calls go out together through :meth:`LLMClient.fan_out` (up to :meth:`LLMClient.width`, what the
endpoint's limiter allows: :mod:`backends.llm.fanout`); a view made with :meth:`LLMClient.metered` counts its calls
into a :class:`~backends.llm.meter.CallMeter` for a live progress display.

Each call's deadline is what it needs at the endpoint's measured speed unless the role configures a ``timeout``
(:mod:`backends.llm.deadline`, :mod:`backends.llm.rates`); work whose call timed out asks once more through
:meth:`LLMClient.patient`, a view with longer deadlines.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from backends.config import PlatformConfig
from backends.llm.context import Budget, BudgetBook, Cut, describe_cuts, fit_request
from backends.llm.deadline import ASSUMED_RATES, PATIENT_FACTOR, call_deadline, need_seconds
from backends.llm.errors import ContextOverflow, LLMError, LLMTimeout, RateLimited
from backends.llm.fanout import fan_out
from backends.llm.limits import Limiters, Width
from backends.llm.meter import CallMeter
from backends.llm.negotiate import StructuredModes
from backends.llm.rates import RateBook
from backends.llm.reasoning import ReasoningSplitter, likely_headless, merge_body, separate, thinking_off_body
from backends.llm.registry import ChatProvider, build_provider
from backends.llm.retry import RetryPolicy, call_with_retries
from backends.llm.structured_call import ask_structured, instructions_for
from backends.llm.types import ChatRequest, ChatResult, Message, StructuredFailure, StructuredResult
from backends.prompts import Prompt
from backends.store.cache import ResponseCache, cache_key
from backends.store.runstore import CallRecord, RunStore

if TYPE_CHECKING:
    from backends.llm.local_server import LocalServers

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
R = TypeVar("R")
MessagesIn = Sequence[Message | dict[str, str]]


def _messages(messages: MessagesIn) -> list[Message]:
    return [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]


class LLMClient:
    """Role-based access to LLMs; one instance per browser session or command."""

    def __init__(
        self,
        config: PlatformConfig,
        *,
        store: RunStore,
        cache: ResponseCache | None = None,
        providers: dict[str, ChatProvider] | None = None,
        servers: LocalServers | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        limiters: Limiters | None = None,
    ):
        self.config = config
        self.limiters = limiters
        self.store = store
        self.cache = cache if config.cache else None
        self.servers = servers
        self._providers: dict[str, ChatProvider] = dict(providers or {})
        self._session_id = session_id
        self._run_id = run_id
        self._lock = threading.Lock()
        self._secrets = [r.api_key.get_secret_value() for r in self.config.roles.values()
                         if r.api_key and len(r.api_key.get_secret_value()) >= 4]
        self.modes = StructuredModes(self.store.capabilities)
        self._budgets = BudgetBook(self.config, self.provider, self.store.capabilities)
        self.rates = RateBook(self.store.capabilities)
        self.patience = 1.0  # deadlines × this (a patient view: the one retry of work whose call timed out)
        self.meter: CallMeter | None = None
        self.streaming = True  # False in an unwatched view: :meth:`stream` makes one non-streamed call

    @property
    def session_id(self) -> str | None:
        """The browser session or command whose calls these are (for the sidebar's totals)."""
        return self._session_id

    @property
    def run_id(self) -> str | None:
        """The run (memory build, simulation, generation…) these calls are accounted to."""
        return self._run_id

    def for_run(self, run_id: str | None) -> LLMClient:
        """A view whose calls are recorded under ``run_id``; providers, connections, store and cache are shared."""
        view = copy.copy(self)
        view._run_id = run_id
        return view

    def for_session(self, session_id: str | None) -> LLMClient:
        """A view whose calls are recorded under ``session_id`` (a batch, a command); everything else is shared."""
        view = copy.copy(self)
        view._session_id = session_id
        return view

    def patient(self, factor: float = PATIENT_FACTOR) -> LLMClient:
        """A view whose calls get ``factor`` × their deadline (configured or computed): a unit, synthesis step or
        build stage whose call timed out asks again once through it before it fails."""
        view = copy.copy(self)
        view.patience = factor
        return view

    def unwatched(self) -> LLMClient:
        """A view for work nobody watches as it is written (a job run by a command or on a Ray worker): its
        :meth:`stream` makes one non-streamed call and yields the whole answer as one delta, then the result. Parsing
        a stream's chunks costs the app several times the CPU of one answer, and no one would see the deltas."""
        view = copy.copy(self)
        view.streaming = False
        return view

    def metered(self, meter: CallMeter) -> LLMClient:
        """A view whose calls are also counted into ``meter`` (in flight, sent, cached prompt tokens)."""
        view = copy.copy(self)
        view.meter = meter
        return view

    # ------------------------------------------------------------------ concurrency

    def width(self, role: str) -> int:
        """How many independent calls of ``role`` may be in flight together (:mod:`backends.llm.fanout`)."""
        provider = self.provider(role)
        slots = _slots(provider)
        if self.limiters is None:
            return slots or 1
        return self.limiters.width(provider.endpoint, slots)

    def describe_width(self, role: str) -> Width:
        """:meth:`width` with where it comes from (configured, the server's slots, the default), for Settings."""
        provider = self.provider(role)
        slots = _slots(provider)
        if self.limiters is None:
            return Width(endpoint=provider.endpoint, width=slots or 1, ceiling=slots or 1,
                         source="server slots" if slots else "none")
        return self.limiters.describe(provider.endpoint, slots)

    def fan_out(self, role: str, fn: Callable[[T], R], items: Sequence[T],
                cancel: threading.Event | None = None, held: int = 0) -> list[R]:
        """``[fn(item) for item in items]`` with up to :meth:`width` items in flight, less ``held`` slots the
        caller keeps busy with other calls meanwhile (never fewer than one); results in item order (see
        :func:`backends.llm.fanout.fan_out` for failures and cancels)."""
        return fan_out(fn, items, max(1, self.width(role) - held), cancel, name=role)

    # ------------------------------------------------------------------ plumbing

    def provider(self, role: str) -> ChatProvider:
        with self._lock:
            if role not in self._providers:
                self._providers[role] = build_provider(self.config.role(role), self.config, self.servers)
            return self._providers[role]

    def with_provider(self, role: str, provider: ChatProvider, **role_overrides: Any) -> LLMClient:
        """A client that answers ``role`` with ``provider`` (and ``role_overrides`` on its settings, e.g. the
        model name records show) and shares everything else with this one: store, cache, ids, other roles."""
        config = self.config.model_copy(deep=True)
        config.roles[role] = config.role(role).model_copy(update=role_overrides)
        return _RoleOverride(self, role, provider, config)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _request(self, role: str, messages: MessagesIn, overrides: dict[str, Any]) -> ChatRequest:
        """The request as configured. An unset ``max_tokens`` is the role's own budget here (the cache key's);
        :meth:`_fit` lowers it to the role's share of the window once the window is known, and :meth:`_timed` sets
        its deadline."""
        rc = self.config.role(role)
        req = ChatRequest(model=rc.model, messages=_messages(messages), temperature=rc.temperature,
                          max_tokens=rc.answer_budget(role, None) if rc.max_tokens is None else rc.max_tokens)
        if rc.provider == "local":
            req.extra.setdefault("repeat_penalty", 1.1)  # llama.cpp: keeps tiny models from looping
        if rc.thinking == "off":
            req.extra = merge_body(req.extra, thinking_off_body(rc.model, rc.base_url, rc.thinking_switch)[0])
        return req.model_copy(update=overrides) if overrides else req

    def budget(self, role: str, max_tokens: int | None = None, structured: type[BaseModel] | None = None) -> Budget:
        """What a prompt of ``role`` may take (window − max_tokens) and the counter that counts it; for a
        ``structured`` call, less the format instructions the client adds."""
        reserved = instructions_for(self, role, structured) if structured is not None else ""
        return self._budgets.budget(role, max_tokens, reserved)

    def _record(self, role: str, provider: ChatProvider, req: ChatRequest, prompt: Prompt | None,
                result: ChatResult | None, error: str | None, structured_ok: bool | None = None,
                **extra: Any) -> None:
        sent = result is not None and not result.cache_hit
        self.store.record_call(CallRecord(
            session_id=self.session_id, run_id=self.run_id, role=role, provider=provider.name,
            endpoint=provider.endpoint, model=result.model if result else req.model,
            prompt_name=prompt.name if prompt else None, prompt_version=prompt.version if prompt else None,
            tokens_in=result.tokens_in if result else 0, tokens_out=result.tokens_out if result else 0,
            latency_ms=result.latency_ms if result else 0.0, cache_hit=bool(result and result.cache_hit),
            attempts=result.attempts if result else 1, structured_ok=structured_ok,
            error=self.redact(error) if error else None,
            reasoning_tokens=result.reasoning_tokens if result else 0,
            reasoning_counter=result.reasoning_counted_by if result and result.reasoning else None,
            tokens_counter="endpoint" if result and (result.tokens_in or result.tokens_out) else None,
            tokens_cached=result.tokens_cached if result is not None and sent else None,
            tokens_processed=result.tokens_in - result.tokens_cached
            if result is not None and sent and result.tokens_cached is not None else None,
            max_tokens=req.max_tokens, **extra,
        ), reasoning=result.reasoning if result and not result.cache_hit else "")

    def _fit(self, role: str, req: ChatRequest, shrink_answer: bool, cuts: list[Cut] | None,
             derived: bool = False) -> tuple[ChatRequest, dict[str, Any]]:
        """The request to send and what fitting it recorded; :class:`ContextOverflow` if it cannot fit. ``derived``:
        the answer budget is the role's own (not set), so it becomes the role's share of the window first."""
        if derived:
            req = req.model_copy(update={"max_tokens": self._budgets.answer_tokens(role)})
        budget = self.budget(role, req.max_tokens)
        try:
            sent, counted, note = fit_request(budget, req, shrink_answer)
        except ContextOverflow as e:
            raise ContextOverflow(f"{self.provider(role).endpoint}: {e}", status=e.status) from None
        notes = [n for n in (describe_cuts(cuts or []), note) if n]
        return sent, {"prompt_tokens_est": counted, "est_counter": budget.counter_name if counted else None,
                      "context_window": budget.window, "fit_note": "; ".join(notes) or None}

    def _timed(self, role: str, provider: ChatProvider, req: ChatRequest, counted: int | None) -> ChatRequest:
        """``req`` with its deadline: the configured ``timeout``, else what it needs at the endpoint's rates
        (measured on the first call to a server that can be measured; :mod:`backends.llm.rates`)."""
        rc = self.config.role(role)
        rates = self.rates.rates(provider, rc.model) if rc.timeout is None else ASSUMED_RATES
        tokens = counted or max(1, sum(len(m.content) for m in req.messages) // 3)
        deadline = call_deadline(prompt_tokens=tokens, max_tokens=req.max_tokens, rates=rates, idle=rc.idle_timeout,
                                 configured=rc.timeout, factor=self.patience)
        if self.meter is not None and rates is not ASSUMED_RATES:  # shown beside progress: only a measured need
            self.meter.expect(sum(need_seconds(tokens, req.max_tokens, rates)))
        return req.model_copy(update={"timeout": deadline.total, "first_token_timeout": deadline.first,
                                      "deadline_note": deadline.how})

    def _timed_out(self, role: str, provider: ChatProvider, e: LLMError) -> None:
        """A computed deadline was missed: the endpoint's rates are measured again before the next call."""
        rc = self.config.role(role)
        if isinstance(e, LLMTimeout) and rc.timeout is None:
            self.rates.outdated(provider.endpoint, rc.model)

    def _raise_redacted(self, e: LLMError) -> None:
        redacted = type(e)(self.redact(str(e)), status=e.status, retry_after=e.retry_after)
        raise redacted from None

    def _limited(self, provider: ChatProvider, req: ChatRequest, call: Callable[[], Any],
                 cancel: threading.Event | None) -> Any:
        """``call()`` inside one request slot of the provider's endpoint (the process's shared limits)."""
        if self.limiters is None:
            return call()
        estimate = sum(len(m.content) for m in req.messages) // 3 + 64
        with self.limiters.slot(provider.endpoint, estimate, cancel, _slots(provider)) as slot:
            try:
                result = call()
            except RateLimited as e:
                slot.rate_limited, slot.retry_after = True, e.retry_after
                raise
            if isinstance(result, ChatResult) and (result.tokens_in or result.tokens_out):
                slot.used_tokens = result.tokens_in + result.tokens_out
            return result

    def _started(self) -> None:
        if self.meter is not None:
            self.meter.started()

    def _ended(self, result: ChatResult | None) -> None:
        if self.meter is not None:
            self.meter.ended(result.tokens_in, result.tokens_cached, result.tokens_out) if result else self.meter.ended()

    def evict(self, role: str, messages: MessagesIn, cache_salt: str = "", **overrides: Any) -> None:
        """Drop a cached answer the caller rejected (unparsable, empty), so asking again really asks again."""
        if self.cache is not None:
            req = self._request(role, messages, overrides)
            self.cache.delete(cache_key(self.provider(role).endpoint, req, cache_salt))

    # ------------------------------------------------------------------ calls

    def chat(self, role: str, messages: MessagesIn, *, prompt: Prompt | None = None, use_cache: bool = True,
             cache_salt: str = "", cancel: threading.Event | None = None, shrink_answer: bool = True,
             structured_mode: str | None = None, cuts: list[Cut] | None = None,
             **overrides: Any) -> ChatResult:
        """One completion. Raises a typed :class:`LLMError` (key-free message) when the endpoint fails, and
        :class:`ContextOverflow` before sending a prompt that cannot fit the role's window (``max_tokens`` is
        lowered to what the window leaves unless ``shrink_answer`` is False). ``cuts`` made by the caller to fit
        the prompt are recorded with the call."""
        provider = self.provider(role)
        req = self._request(role, messages, overrides)
        key = cache_key(provider.endpoint, req, cache_salt) if self.cache is not None and use_cache else None
        if key and (hit := self.cache.get(key)) is not None:  # type: ignore[union-attr]  # key is set only when there is a cache
            self._record(role, provider, req, prompt, hit, None, structured_mode=structured_mode)
            if self.meter is not None:
                self.meter.hit()
            return hit
        policy = RetryPolicy(max_retries=self.config.role(role).max_retries)
        fitted: dict[str, Any] = {}
        derived = self.config.role(role).max_tokens is None and "max_tokens" not in overrides
        answered: ChatResult | None = None
        self._started()
        try:
            sent, fitted = self._fit(role, req, shrink_answer, cuts, derived)
            sent = self._timed(role, provider, sent, fitted.get("prompt_tokens_est"))
            result, attempts = call_with_retries(
                lambda: self._limited(provider, sent, lambda: provider.complete(sent), cancel), policy, cancel)
            answered = result
        except LLMError as e:
            self._record(role, provider, req, prompt, None, f"{type(e).__name__}: {e}", structured_mode=structured_mode,
                         **fitted)
            self._timed_out(role, provider, e)
            self._raise_redacted(e)
        finally:
            self._ended(answered)
        result = separate(result, self._budgets.counter(role), attempts=attempts)
        if key:
            self.cache.put(key, provider.endpoint, result)  # type: ignore[union-attr]  # key is set only when there is a cache
        self._record(role, provider, sent, prompt, result, None, structured_mode=structured_mode, **fitted)
        return result

    def stream(self, role: str, messages: MessagesIn, *, prompt: Prompt | None = None, use_cache: bool = True,
               cache_salt: str = "", cancel: threading.Event | None = None, shrink_answer: bool = True,
               cuts: list[Cut] | None = None, structured_mode: str | None = None,
               **overrides: Any) -> Iterator[str | ChatResult]:
        """Yield answer deltas then the final :class:`ChatResult` (thinking never among the deltas; see
        :class:`ReasoningSplitter`). Connection failures before the first token are retried; a cached
        answer is replayed at once. Window fitting as in :meth:`chat`; ``structured_mode`` is recorded with the
        call, as there (a structured call whose JSON is read while it is written). In an :meth:`unwatched` view the
        call is not streamed: the whole answer comes as one delta."""
        if not self.streaming:
            yield from self._stream_at_once(role, messages, prompt=prompt, use_cache=use_cache, cache_salt=cache_salt,
                                            cancel=cancel, shrink_answer=shrink_answer, cuts=cuts,
                                            structured_mode=structured_mode, **overrides)
            return
        provider = self.provider(role)
        req = self._request(role, messages, overrides)
        key = cache_key(provider.endpoint, req, cache_salt) if self.cache is not None and use_cache else None
        if key and (hit := self.cache.get(key)) is not None:  # type: ignore[union-attr]  # key is set only when there is a cache
            self._record(role, provider, req, prompt, hit, None, structured_mode=structured_mode)
            if self.meter is not None:
                self.meter.hit()
            yield hit.text
            yield hit
            return
        policy = RetryPolicy(max_retries=self.config.role(role).max_retries)
        sent, fitted = req, dict[str, Any]()

        def first_chunk() -> tuple[Iterator[str | ChatResult], str | ChatResult | None]:
            it = iter(provider.stream(sent))
            return it, next(it, None)

        def limited_first_chunk() -> tuple[Iterator[str | ChatResult], str | ChatResult | None]:
            # the slot covers the time to the first token (what endpoints queue on); usage is counted when known
            return self._limited(provider, sent, first_chunk, cancel)

        splitter = ReasoningSplitter(hold=likely_headless(self.config.role(role).model))
        derived = self.config.role(role).max_tokens is None and "max_tokens" not in overrides
        result: ChatResult | None = None
        self._started()
        try:
            sent, fitted = self._fit(role, req, shrink_answer, cuts, derived)
            sent = self._timed(role, provider, sent, fitted.get("prompt_tokens_est"))
            (it, first), attempts = call_with_retries(limited_first_chunk, policy, cancel)
            # chained, not unpacked into a list: a list would read the whole answer before the first delta is yielded
            for chunk in itertools.chain([first] if first is not None else [], it):
                if cancel is not None and cancel.is_set():
                    break
                if isinstance(chunk, ChatResult):
                    result = chunk.model_copy(update={"attempts": attempts})
                elif answer := splitter.feed(chunk):
                    yield answer
            if rest := splitter.finish():
                yield rest
        except LLMError as e:
            self._record(role, provider, req, prompt, None, f"{type(e).__name__}: {e}", structured_mode=structured_mode,
                         **fitted)
            self._timed_out(role, provider, e)
            self._raise_redacted(e)
        finally:
            self._ended(result)
        if result is None:
            return
        result = separate(result, self._budgets.counter(role))
        if key and result.text:
            self.cache.put(key, provider.endpoint, result)  # type: ignore[union-attr]  # key is set only when there is a cache
        self._record(role, provider, sent, prompt, result, None, structured_mode=structured_mode, **fitted)
        yield result

    def _stream_at_once(self, role: str, messages: MessagesIn, *, cancel: threading.Event | None,
                        **kwargs: Any) -> Iterator[str | ChatResult]:
        """:meth:`stream` of an unwatched view: :meth:`chat` (same cache, fitting, deadline and record), its answer
        as one delta, then the result — unless ``cancel`` was set while the delta was read (a caller that stops a
        stream on what it read), as a stream stopped there yields no result."""
        if cancel is not None and cancel.is_set():
            return
        result = self.chat(role, messages, cancel=cancel, **kwargs)
        if result.text:
            yield result.text
        if cancel is not None and cancel.is_set():
            return
        yield result

    def structured(self, role: str, messages: MessagesIn, model: type[M], *, prompt: Prompt | None = None,
                   retries: int = 2, use_cache: bool = True, cache_salt: str = "",
                   cancel: threading.Event | None = None, check: Callable[[M], str | None] | None = None,
                   mode: str | None = None, shrink_answer: bool = True, cuts: list[Cut] | None = None,
                   on_text: Callable[[str], None] | None = None,
                   **overrides: Any) -> StructuredResult[M] | StructuredFailure:
        """Ask for an instance of ``model``: bounded JSON schema, tolerant parsing, validation errors fed back.
        ``on_text`` gets the first attempt's JSON as it streams (the call then goes through :meth:`stream`).

        ``check`` may reject a parsed value with a message (a semantic rule the schema cannot express);
        it is treated like a validation error. Rejected answers are evicted from the cache.
        Never raises for a model's slip: after ``retries`` corrections it returns a
        :class:`StructuredFailure` with every raw text. Endpoint failures still raise :class:`LLMError`.
        The structured mode is negotiated per endpoint (``mode`` forces one); see
        :mod:`backends.llm.structured_call`.
        """
        return ask_structured(self, role, _messages(messages), model, prompt=prompt, retries=retries,
                              use_cache=use_cache, cache_salt=cache_salt, cancel=cancel, check=check, mode=mode,
                              shrink_answer=shrink_answer, cuts=cuts, on_text=on_text, **overrides)


def _slots(provider: ChatProvider) -> int | None:
    """Requests the provider's server serves at once, when it says (the bundled server, a llama.cpp server)."""
    slots = getattr(provider, "slots", None)
    return slots() if callable(slots) else None


class _RoleOverride(LLMClient):
    """See :meth:`LLMClient.with_provider`; the ids are the parent's at the time of the override."""

    def __init__(self, parent: LLMClient, role: str, provider: ChatProvider, config: PlatformConfig):
        self._parent, self._role, self._override = parent, role, provider
        super().__init__(config, store=parent.store, cache=parent.cache, servers=parent.servers,
                         session_id=parent.session_id, run_id=parent.run_id, limiters=parent.limiters)
        self.cache, self.meter, self.patience = parent.cache, parent.meter, parent.patience
        self.streaming = parent.streaming

    def provider(self, role: str) -> ChatProvider:
        return self._override if role == self._role else self._parent.provider(role)
