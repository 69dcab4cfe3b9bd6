"""Valid answers made up from the JSON schema a structured request carries — enough for every step of the
synthesis pipeline, H²Memory, the simulator and the FairEval judge to accept them on the first try, so a bench
built on a fake endpoint measures the protocol, not retries.

Every JSON type gets a schema-valid value: enums cycle in order (months, requirement ids, S1…S8 come out distinct
and in order), booleans and numbers vary from answer to answer inside their bounds, ``anyOf`` takes its first
non-null branch, arrays keep between ``minItems`` and ``maxItems`` items, and strings are varied first-person
sentences, unique (they end with their serial) and as long as ``minLength`` asks, never longer than ``maxLength``.
Log timestamps are placed inside the span the prompt names. ``serial`` numbers the strings: a shared counter
(unique across requests, as the synthesis tests' fake has it) or a fresh one per request, which with a ``tag``
derived from the request makes the answer a function of the request alone — the same whatever order concurrent
requests arrive in.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

_SPAN = re.compile(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) ~ (\d{4}-\d{2}-\d{2} \d{2}:\d{2})")
# the words a made-up sentence is drawn from: a subject, what it does and what about (8 × 8 × 8 sentences)
OPENERS = ("I think", "I would say", "Lately I find", "Most days I feel", "I guess", "Honestly I believe",
           "On weekends I notice", "In the evenings I think")
CLAIMS = ("a short walk helps with", "I need a plan for", "it is hard to keep up with", "my partner cares about",
          "there is little time for", "I want to change", "a reminder would help with", "I keep worrying about")
THINGS = ("sleep", "meal prep", "the family budget", "a weekend hike", "team meetings", "guitar practice",
          "family dinners", "back pain")
PADDING = " I can say more about it if that helps."


def _pick(key: str) -> int:
    """A number that depends on ``key`` only (stable across processes, unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big")


def sentence(name: str, key: str, serial: str, low: int = 0, high: int = 10_000) -> str:
    """A first-person sentence chosen by ``key``, ending with ``serial`` (so no two are equal), between ``low`` and
    ``high`` characters long."""
    n = _pick(f"{name}/{key}")
    text = f"{OPENERS[n % 8]} {CLAIMS[(n >> 3) % 8]} {THINGS[(n >> 6) % 8]} ({serial})."
    if len(text) > high:  # too long for a tight bound: the serial alone still keeps it unique
        text = f"{THINGS[(n >> 6) % 8]} {serial}"
    while len(text) < low:
        text += PADDING
    return text[:high]


def _number(schema: dict[str, Any], key: str, kind: str) -> int | float:
    low, high = schema.get("minimum", 1), schema.get("maximum", max(schema.get("minimum", 1), 30))
    if kind == "integer":
        return int(low) + _pick(key) % (int(high) - int(low) + 1)
    return round(low + (high - low) * (_pick(key) % 1000) / 999, 2)


def _branch(options: list[dict[str, Any]]) -> dict[str, Any]:
    return next((o for o in options if o.get("type") != "null"), options[0])


def fill(schema: dict[str, Any], name: str, enums: dict[str, int], serial: Iterator[int], tag: str = "") -> Any:
    """A valid value of ``schema`` (a bounded, ref-free JSON schema) for the field ``name``."""
    if "enum" in schema:
        key = json.dumps(schema["enum"])
        i = enums.get(key, 0)
        enums[key] = i + 1
        return schema["enum"][i % len(schema["enum"])]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return fill(_branch(schema[key]), name, enums, serial, tag)
    if len(schema.get("allOf", [])) == 1:
        return fill({**schema["allOf"][0], **{k: v for k, v in schema.items() if k != "allOf"}}, name, enums,
                    serial, tag)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {k: fill(v, k, enums, serial, tag) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        n = max(1, schema.get("minItems", 1))
        return [fill(schema.get("items", {}), name, enums, serial, tag) for _ in range(min(n, schema.get("maxItems", n)))]
    if kind in ("integer", "number"):
        return _number(schema, f"{name}/{tag}{next(serial)}", kind)
    if kind == "boolean":
        return _pick(f"{name}/{tag}{next(serial)}") % 2 == 0
    if kind == "string":
        mark = f"{tag}{next(serial)}"
        return sentence(name, mark, mark, schema.get("minLength", 0), schema.get("maxLength", 10_000))
    return None


def schema_answer(name: str, schema: dict[str, Any], prompt: str, serial: Iterator[int] | None = None) -> Any:
    """A valid value of ``schema`` (the reply model ``name``) for a request whose user prompt is ``prompt``;
    without ``serial`` the value depends on the request only (see the module docstring)."""
    tag = ""
    if serial is None:
        serial, tag = itertools.count(1), hashlib.sha1(prompt.encode()).hexdigest()[:6] + "-"
    value = fill(schema, "root", {}, serial, tag)
    if name == "SituationLogsReply" and (span := _SPAN.search(prompt)):
        start = datetime.strptime(span.group(1), "%Y-%m-%d %H:%M")
        for j, log in enumerate(value["logs"], start=1):
            log["timestamp"] = (start + timedelta(minutes=37 * j)).strftime("%Y-%m-%d %H:%M")
    return value
