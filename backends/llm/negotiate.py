"""Structured-output negotiation per endpoint + model: try the configured mode, step down when it is refused.

Modes, most to least capable (:data:`MODES`):

* ``json_schema`` — ``response_format: {type: json_schema, json_schema: {name, schema}}``; llama.cpp, vLLM,
  SGLang and OpenAI enforce it;
* ``json_schema_strict`` — the same with ``strict: true`` and the schema reduced to what strict servers
  accept (:func:`backends.llm.structured.strict_schema`), for servers that reject ``maxLength`` & co.;
* ``json_object`` — ``response_format: {type: json_object}`` (DeepSeek, DashScope and other hosted services);
* ``prompt`` — no ``response_format``: the full schema is in the prompt and the reply is parsed tolerantly.

A request refused with a 400/422 that is about the format (:func:`is_format_rejection`) is retried at once in
the next mode (:func:`next_mode`); the mode that works is remembered in the run store
(:class:`backends.store.capabilities.CapabilityStore`) with the reason, so later calls — in this process or
another — go straight to it. A remembered mode below the configured one wins; Settings can forget it.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from backends.llm.errors import BadRequest, LLMError
from backends.llm.structured import strict_schema
from backends.store.capabilities import CapabilityStore

log = logging.getLogger(__name__)

MODES: tuple[str, ...] = ("json_schema", "json_schema_strict", "json_object", "prompt")
_ABOUT_FORMAT = re.compile(r"response_format|json_schema|json_object|schema|structured output|guided|grammar|strict",
                           re.I)
_ABOUT_KEYWORDS = re.compile(r"invalid schema|not permitted|keyword|additionalProperties|strict|required", re.I)


def rank(mode: str) -> int:
    return MODES.index(mode) if mode in MODES else 0


def effective_mode(configured: str, remembered: str | None) -> str:
    """The less capable of the configured and the remembered mode."""
    return remembered if remembered in MODES and rank(remembered) > rank(configured) else configured


def response_format(mode: str, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if mode == "json_schema_strict":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": strict_schema(schema), "strict": True}}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def is_format_rejection(e: LLMError) -> bool:
    """A request refused because of its ``response_format`` (not auth, not a bad model name, not length)."""
    return isinstance(e, BadRequest) and e.status in (400, 422) and bool(_ABOUT_FORMAT.search(str(e)))


def next_mode(mode: str, message: str) -> str | None:
    """The mode to try after ``mode`` was refused with ``message``; None after ``prompt``.

    From ``json_schema``, a complaint about schema keywords tries the strict reduction first; a refusal of
    the ``json_schema`` type itself goes straight to ``json_object``."""
    if mode == "json_schema":
        return "json_schema_strict" if _ABOUT_KEYWORDS.search(message) else "json_object"
    if mode in ("json_schema_strict", "json_object"):
        return MODES[rank(mode) + 1]
    return None


class StructuredModes:
    """The working mode per (endpoint, model): remembered in memory and in the capability store."""

    def __init__(self, store: CapabilityStore):
        self.store = store
        self._known: dict[tuple[str, str], str | None] = {}
        self._lock = threading.Lock()

    def remembered(self, endpoint: str, model: str) -> str | None:
        key = (endpoint, model)
        with self._lock:
            if key not in self._known:
                caps = self.store.get(endpoint, model)
                self._known[key] = caps.structured_mode if caps else None
            return self._known[key]

    def mode_for(self, endpoint: str, model: str, configured: str) -> str:
        return effective_mode(configured, self.remembered(endpoint, model))

    def worked(self, endpoint: str, model: str, mode: str, note: str | None = None) -> None:
        """``mode`` produced an answer: remember it when it is news (one write per endpoint and mode)."""
        if self.remembered(endpoint, model) == mode and note is None:
            return
        with self._lock:
            self._known[(endpoint, model)] = mode
        fields: dict[str, Any] = {"structured_mode": mode}
        if note is not None:
            fields["structured_note"] = note
        self.store.update(endpoint, model, **fields)
        if note:
            log.info("structured output for %s at %s: %s (%s)", model, endpoint, mode, note)

    def forget(self, endpoint: str, model: str) -> None:
        with self._lock:
            self._known.pop((endpoint, model), None)
        self.store.update(endpoint, model, structured_mode=None, structured_note=None)
