"""Valid answers made up from the JSON schema a structured request carries — enough for every step of the
synthesis pipeline, H²Memory, the simulator and the FairEval judge to accept them.

Enums cycle in order (months, requirement ids, S1…S8 come out distinct and in order), strings are unique and as
long as required, integers stay inside their bounds, and log timestamps are placed inside the span the prompt
names. ``serial`` numbers the strings: a shared counter (unique across requests, as the synthesis tests' fake
has it) or a fresh one per request, which with a ``tag`` derived from the request makes the answer a function
of the request alone — the same whatever order concurrent requests arrive in.
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


def fill(schema: dict[str, Any], name: str, enums: dict[str, int], serial: Iterator[int], tag: str = "") -> Any:
    if "enum" in schema:
        key = json.dumps(schema["enum"])
        i = enums.get(key, 0)
        enums[key] = i + 1
        return schema["enum"][i % len(schema["enum"])]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        return {k: fill(v, k, enums, serial, tag) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [fill(schema["items"], name, enums, serial, tag) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "integer":
        return min(max(schema.get("minimum", 1), 30), schema.get("maximum", 10**9))
    if kind == "string":
        text = f"{name} text {tag}{next(serial)}."
        while len(text) < schema.get("minLength", 0):
            text += " More detail follows here."
        return text[: schema.get("maxLength", 10_000)]
    if "anyOf" in schema:
        return fill(schema["anyOf"][0], name, enums, serial, tag)
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
