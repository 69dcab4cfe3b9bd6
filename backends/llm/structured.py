"""Structured output for models of any size: bounded schemas, tolerant parsing, validation errors fed back.

A 135M-parameter model under greedy decoding repeats until ``max_tokens`` unless every array and
string in the schema is bounded, so :func:`bounded_schema` refuses unbounded models. Parsing
accepts the usual slips (code fences, prose around the object, trailing commas, Python literals,
curly quotes) and reports whether it had to repair anything.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel, ValidationError

SCHEMAS_KEPT = 1024  # schemas bounded_schema keeps (models made at run time must not grow it without end)
# the schemas bounded_schema handed out, by id (each held, so its id stays its own), and their format instructions:
# a shared schema never changes, so neither do they
_SHARED: OrderedDict[int, dict[str, Any]] = OrderedDict()
_INSTRUCTIONS: dict[tuple[int, bool], str] = {}
_SHARED_LOCK = threading.Lock()


class StructuredError(ValueError):
    """The text is not a valid instance of the schema; the message is fed back to the model."""


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = defs[node["$ref"].split("/")[-1]]
                return resolve({**target, **{k: v for k, v in node.items() if k != "$ref"}})
            return {k: resolve(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)


def unbounded_paths(schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every array without ``maxItems`` and string without ``maxLength``/``enum``/``const``."""
    found: list[str] = []
    kind = schema.get("type")
    if kind == "array":
        if "maxItems" not in schema:
            found.append(path)
        if isinstance(schema.get("items"), dict):
            found += unbounded_paths(schema["items"], path + "[]")
    elif kind == "string" and not ({"maxLength", "enum", "const"} & set(schema)):
        found.append(path)
    for key, sub in schema.get("properties", {}).items():
        found += unbounded_paths(sub, f"{path}.{key}")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key, [])):
            found += unbounded_paths(sub, f"{path}<{key}{i}>")
    if isinstance(schema.get("additionalProperties"), dict):
        found += unbounded_paths(schema["additionalProperties"], path + ".*")
    return found


@functools.lru_cache(maxsize=SCHEMAS_KEPT)
def bounded_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with references inlined; raises if any array or string is unbounded.

    Built once per model class and shared by every call of it (pydantic takes milliseconds to build a schema, a
    protocol run makes hundreds of thousands of structured calls): callers read it and never change it. The
    bound on the cache keeps models made at run time (a task's candidate ids) from growing it without end."""
    schema = _inline_refs(model.model_json_schema())
    missing = unbounded_paths(schema)
    if missing:
        raise ValueError(f"{model.__name__}: unbounded schema at {', '.join(missing)} (add max_length / maxItems)")
    with _SHARED_LOCK:
        _SHARED[id(schema)] = schema
        while len(_SHARED) > SCHEMAS_KEPT:
            gone, _ = _SHARED.popitem(last=False)
            for full in (True, False):
                _INSTRUCTIONS.pop((gone, full), None)
    return schema


def schema_instructions(schema: dict[str, Any], full: bool = True) -> str:
    """What to tell the model about the format. When the endpoint enforces the schema by grammar
    (``json_schema`` mode), naming the fields is enough and keeps prompts short for small models. Written once
    per schema :func:`bounded_schema` shares (every structured call of a model asks for them)."""
    key = (id(schema), full)
    with _SHARED_LOCK:
        if _SHARED.get(id(schema)) is schema and (text := _INSTRUCTIONS.get(key)) is not None:
            return text
    text = _instructions(schema, full)
    with _SHARED_LOCK:
        if _SHARED.get(id(schema)) is schema:  # a schema built elsewhere may still change: never kept
            _INSTRUCTIONS[key] = text
    return text


def _instructions(schema: dict[str, Any], full: bool) -> str:
    if not full:
        fields = ", ".join(schema.get("properties", {}))
        return f"Reply with one JSON object only (fields: {fields}), no prose."
    return ("Reply with one JSON object only, no prose and no code fences. It must match this JSON schema:\n"
            + json.dumps(schema, ensure_ascii=False, separators=(",", ":")))


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_PY_LITERALS = {r"\bTrue\b": "true", r"\bFalse\b": "false", r"\bNone\b": "null"}


def _first_object(text: str) -> str | None:
    start = text.find("{")
    if start < 0:
        return None
    depth, in_str, esc = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            esc = (ch == "\\") and not esc
            if ch == '"' and not esc:
                in_str = False
            elif ch != "\\":
                esc = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def extract_json(text: str) -> tuple[Any, bool]:
    """The JSON object in ``text`` and whether a repair was needed; raises :class:`StructuredError`."""
    candidate = text.strip()
    try:
        return json.loads(candidate), False
    except json.JSONDecodeError:
        pass
    fenced = _FENCE.search(candidate)
    if fenced:
        candidate = fenced.group(1).strip()
    obj = _first_object(candidate) or candidate
    attempts = [obj]
    fixed = _TRAILING_COMMA.sub(r"\1", obj.replace("“", '"').replace("”", '"'))
    for pattern, repl in _PY_LITERALS.items():
        fixed = re.sub(pattern, repl, fixed)
    attempts.append(fixed)
    for attempt in attempts:
        try:
            return json.loads(attempt), True
        except json.JSONDecodeError as e:
            last = e
    raise StructuredError(f"not valid JSON ({last.msg} at character {last.pos})" if text.strip() else "empty reply")


def parse_structured(text: str, model: type[BaseModel]) -> tuple[BaseModel, bool]:
    data, repaired = extract_json(text)
    try:
        return model.model_validate(data), repaired
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'object'}: {err['msg']}" for err in e.errors()[:5])
        raise StructuredError(f"JSON does not match the schema: {problems}") from None


# keywords OpenAI's strict structured outputs accept (others are rejected with a 400); the same subset
# works on every server that enforces schemas by grammar
STRICT_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
                   "description", "title", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                   "exclusiveMaximum", "multipleOf", "minItems", "maxItems"}


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` for a strict server: unsupported keywords (``maxLength``, ``default``…) dropped, every object
    closed (``additionalProperties: false``) with all its properties required. Lengths the schema loses are
    still checked when the answer is validated, and the full schema stays in the prompt."""

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(v) for v in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key not in STRICT_KEYWORDS:
                continue
            if key == "properties":
                out[key] = {name: clean(sub) for name, sub in value.items()}
            elif key in ("items", "anyOf"):
                out[key] = clean(value)
            elif key == "additionalProperties":
                if isinstance(value, dict):  # a free-form map: strict mode cannot say it, the server decides
                    out[key] = clean(value)
            else:
                out[key] = value
        if (out.get("type") == "object" or "properties" in out) and not isinstance(out.get("additionalProperties"), dict):
            out["additionalProperties"] = False
            out["required"] = list(out.get("properties", {}))
        if "allOf" in node and len(node["allOf"]) == 1:  # pydantic wraps some refs in allOf
            out = {**clean(node["allOf"][0]), **{k: v for k, v in out.items() if k != "type"}}
        return out

    return clean(schema)
