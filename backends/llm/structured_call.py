"""The structured call behind ``LLMClient.structured``: negotiation, tolerant parsing, corrections that fit.

Each attempt sends the caller's messages with the format instructions, plus the earlier rejected answers
and why they were rejected (so the model can correct itself). Those correction turns are fitted to the
role's window: the oldest are dropped first, then the latest rejected answer is shortened (its start kept);
each cut is recorded with the call. A refusal of the structured mode itself steps down the mode
(:mod:`backends.llm.negotiate`) without counting as an attempt. A caller's ``seed`` moves on by one with each
re-ask: an endpoint that honours it would otherwise send back the answer it just rejected.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from backends.config import PlatformConfig
from backends.llm.context import Budget, Cut
from backends.llm.errors import Cancelled, LLMError
from backends.llm.negotiate import StructuredModes, is_format_rejection, next_mode, response_format
from backends.llm.registry import ChatProvider
from backends.llm.structured import StructuredError, bounded_schema, parse_structured, schema_instructions
from backends.llm.types import ChatResult, Message, StructuredFailure, StructuredResult
from backends.prompts import Prompt

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
REJECTED_CHARS = 4000  # a rejected answer fed back is at most this long
CUT = "cut at the answer budget"  # starts the error of an answer the endpoint stopped at max_tokens


class ChatClient(Protocol):
    """What a structured call needs of :class:`backends.llm.client.LLMClient` (named here, so this module does
    not import the client that imports it)."""

    config: PlatformConfig
    modes: StructuredModes

    def provider(self, role: str) -> ChatProvider: ...

    def budget(self, role: str, max_tokens: int | None = None, structured: type[BaseModel] | None = None) -> Budget: ...

    def chat(self, role: str, messages: Sequence[Message], **kwargs: Any) -> ChatResult: ...

    def stream(self, role: str, messages: Sequence[Message], **kwargs: Any) -> Iterator[str | ChatResult]: ...

    def redact(self, text: str) -> str: ...

    def evict(self, role: str, messages: Sequence[Message], cache_salt: str = "", **overrides: Any) -> None: ...


def format_instructions(schema: dict[str, Any], mode: str, provider: str) -> str:
    """The format instructions for ``mode`` on ``provider``: the full schema unless the bundled server enforces
    it by grammar (``json_schema`` on ``local``), where naming the fields is enough."""
    return schema_instructions(schema, full=mode != "json_schema" or provider != "local")


def with_instructions(messages: Sequence[Message], schema: dict[str, Any], mode: str, provider: str) -> list[Message]:
    """The messages with the format instructions (:func:`format_instructions`) at the end of the last user message
    (a user message of their own when there is none): what every call of a prompt shares stays first, so a
    server's prompt cache serves it, and the format — the call's own — comes last, where a small model heeds it."""
    msgs = list(messages)
    instructions = format_instructions(schema, mode, provider)
    last = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "user"), None)
    if last is not None and last == len(msgs) - 1:
        msgs[last] = Message(role="user", content=f"{msgs[last].content}\n\n{instructions}")
    else:
        msgs.append(Message(role="user", content=instructions))
    return msgs


def instructions_for(client: ChatClient, role: str, model: type[BaseModel]) -> str:
    """The format instructions a structured call of ``model`` adds to the prompt now (for budgets)."""
    rc, provider = client.config.role(role), client.provider(role)
    mode = client.modes.mode_for(provider.endpoint, rc.model, rc.structured_mode)
    return format_instructions(bounded_schema(model), mode, rc.provider)


def correction_turns(rejected: list[tuple[str, str]]) -> list[Message]:
    out: list[Message] = []
    for text, reason in rejected:
        out += [Message(role="assistant", content=text[:REJECTED_CHARS]),
                Message(role="user", content=f"That reply was rejected: {reason}. "
                                             "Reply again with only the corrected JSON object.")]
    return out


def fit_corrections(budget: Budget, head: list[Message], rejected: list[tuple[str, str]]) -> tuple[list[Message], list[Cut]]:
    """``head`` + as many correction turns as fit (newest kept), the last rejected answer shortened if need be."""
    msgs = head + correction_turns(rejected)
    if budget.limit is None or budget.room(msgs) >= 0:  # type: ignore[operator]  # room() is an int once a limit is known
        return msgs, []
    kept, dropped = list(rejected), []
    while len(kept) > 1 and budget.room(head + correction_turns(kept)) < 0:  # type: ignore[operator]  # room() is an int once a limit is known
        dropped.append(kept.pop(0))
    cuts = []
    before = budget.count_messages(correction_turns(rejected))
    if dropped:
        cuts.append(Cut(what="correction turns", unit="rejected answers", removed=[f"#{i + 1}" for i in range(len(dropped))],
                        tokens=before - budget.count_messages(correction_turns(kept)), limit=budget.limit,
                        counter=budget.counter_name))
    room = budget.room(head + correction_turns(kept))
    if kept and room is not None and room < 0:
        text, reason = kept[-1]
        tokens = budget.count(text)
        keep_chars = max(0, int(len(text) * max(0, tokens + room) / max(tokens, 1)) - 20)
        kept[-1] = (text[:keep_chars] + " …", reason)
        cuts.append(Cut(what="correction turns", unit="characters of the last rejected answer",
                        removed=[f"{keep_chars}–{len(text)}"], tokens=-room, limit=budget.limit,
                        counter=budget.counter_name))
    return head + correction_turns(kept), cuts


def answer(client: ChatClient, role: str, msgs: list[Message], on_text: Callable[[str], None] | None,
           cancel: threading.Event | None, **kwargs: Any) -> ChatResult:
    """One attempt's completion: ``client.chat``, or, when ``on_text`` is given, ``client.stream`` with each delta
    of the answer passed to it (a caller that reads the JSON while it is written, e.g. to show a decision as soon as
    its first field is out). Raises :class:`Cancelled` when ``cancel`` stops a stream before its end."""
    if on_text is None:
        return client.chat(role, msgs, cancel=cancel, **kwargs)
    final: ChatResult | None = None
    for chunk in client.stream(role, msgs, cancel=cancel, **kwargs):
        if isinstance(chunk, ChatResult):
            final = chunk
        else:
            on_text(chunk)
    if final is None:
        raise Cancelled(f"{role}: the structured answer was cancelled while it streamed")
    return final


@functools.lru_cache(maxsize=1024)
def result_type(model: type[BaseModel]) -> type[StructuredResult]:
    """``StructuredResult[model]``, made once per model class: pydantic's parametrisation takes over a millisecond
    of CPU each time it is looked up, and every structured call returns one."""
    return StructuredResult[model]  # type: ignore[valid-type]  # the result type is parametrised by the run-time model


def ask_structured(client: ChatClient, role: str, messages: Sequence[Message], model: type[M], *,
                   prompt: Prompt | None = None, retries: int = 2, use_cache: bool = True, cache_salt: str = "",
                   cancel: threading.Event | None = None, check: Callable[[M], str | None] | None = None,
                   mode: str | None = None, shrink_answer: bool = True, cuts: list[Cut] | None = None,
                   on_text: Callable[[str], None] | None = None,
                   **overrides: Any) -> StructuredResult[M] | StructuredFailure:
    """See :meth:`backends.llm.client.LLMClient.structured`; ``mode`` forces one mode (no negotiation);
    ``cuts`` the caller made to fit its prompt are recorded with each call; ``on_text`` gets the first attempt's
    answer as it streams (:func:`answer`; a correction is not streamed, so the caller reads one JSON text)."""
    schema = bounded_schema(model)
    rc, provider = client.config.role(role), client.provider(role)
    forced = mode is not None or "response_format" in overrides
    current = mode or client.modes.mode_for(provider.endpoint, rc.model, rc.structured_mode)
    budget = client.budget(role, max_tokens=overrides.get("max_tokens"))
    raws: list[str] = []
    errors: list[str] = []
    thoughts: list[str] = []
    rejected: list[tuple[str, str]] = []
    refused: list[str] = []
    while len(raws) <= retries:
        head = with_instructions(messages, schema, current, rc.provider)
        msgs, trimmed = fit_corrections(budget, head, rejected)
        call = dict(overrides)
        if raws and isinstance(call.get("seed"), int):  # a re-ask samples afresh: one seed would repeat the answer
            call["seed"] = call["seed"] + len(raws)
        if "response_format" not in overrides and (fmt := response_format(current, model.__name__, schema)):
            call["response_format"] = fmt
        try:
            result = answer(client, role, msgs, None if raws else on_text, cancel, prompt=prompt, use_cache=use_cache,
                            cache_salt=cache_salt, shrink_answer=shrink_answer, structured_mode=current,
                            cuts=[*(cuts or []), *trimmed], **call)
        except LLMError as e:
            following = None if forced or not is_format_rejection(e) else next_mode(current, str(e))
            if following is None:
                raise
            log.warning("%s: structured mode %s refused by %s (%s); trying %s", role, current, provider.endpoint,
                        client.redact(str(e)), following)
            refused.append(f"{current} refused: {client.redact(str(e))[:240]}")
            current = following
            continue
        if not forced:
            client.modes.worked(provider.endpoint, rc.model, current, "; ".join(refused) or None)
            refused = []
        raws.append(result.text)
        thoughts.append(result.reasoning)
        try:
            value, repaired = parse_structured(result.text, model)
            if check is not None and (problem := check(value)):  # type: ignore[arg-type]  # value is an instance of model, which check was written for
                raise StructuredError(problem)
        except StructuredError as e:
            cut = result.finish_reason == "length"
            errors.append(f"{CUT} (finish_reason=length after {result.tokens_out} tokens): {e}" if cut else str(e))
            if use_cache:
                client.evict(role, msgs, cache_salt, **call)
            rejected.append((result.text, str(e)))
            continue
        return result_type(model)(value=value, raw=result.text, attempts=len(raws), repaired=repaired,
                                       reasoning=result.reasoning, mode=current)
    return StructuredFailure(raw=raws, errors=errors, attempts=len(raws), reasoning=thoughts, mode=current)
