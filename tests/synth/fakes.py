"""A scripted synthesizer for tests: builds a valid answer from the JSON schema each request carries.

Every structured request names its reply model and schema (``response_format``); the filler walks the
schema — enums cycle in order (months, requirement ids, S1…S8 come out distinct and in order), strings
are unique and as long as required — and log timestamps are placed inside the span the prompt names.
``overrides`` maps a reply model name to a list of raw texts served first (to script invalid answers).
"""

from __future__ import annotations

import itertools
import json
import re
from datetime import datetime, timedelta
from typing import Any

from backends.config import ROLES
from backends.llm.client import LLMClient
from backends.llm.fake import ScriptedLLM
from testkit.workspace import make_workspace

_SPAN = re.compile(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) ~ (\d{4}-\d{2}-\d{2} \d{2}:\d{2})")
_serial = itertools.count(1)


def fill(schema: dict[str, Any], name: str, enums: dict[str, int]) -> Any:
    if "enum" in schema:
        key = json.dumps(schema["enum"])
        i = enums.get(key, 0)
        enums[key] = i + 1
        return schema["enum"][i % len(schema["enum"])]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        return {k: fill(v, k, enums) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [fill(schema["items"], name, enums) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "integer":
        return max(schema.get("minimum", 1), 30)
    if kind == "string":
        text = f"{name} text {next(_serial)}."
        while len(text) < schema.get("minLength", 0):
            text += " More detail follows here."
        return text[: schema.get("maxLength", 10_000)]
    if "anyOf" in schema:
        return fill(schema["anyOf"][0], name, enums)
    return None


def answer(req) -> dict[str, Any]:
    fmt = req.response_format["json_schema"]
    value = fill(fmt["schema"], "root", {})
    if fmt["name"] == "SituationLogsReply":
        start = datetime.strptime(_SPAN.search(req.messages[1].content).group(1), "%Y-%m-%d %H:%M")
        for j, log in enumerate(value["logs"], start=1):
            log["timestamp"] = (start + timedelta(minutes=37 * j)).strftime("%Y-%m-%d %H:%M")
    return value


class SchemaLLM(ScriptedLLM):
    """Valid answers from the schema; scripted raw texts first where ``overrides`` says so."""

    def __init__(self, overrides: dict[str, list[str]] | None = None):
        super().__init__(self._reply)
        self.overrides = {k: list(v) for k, v in (overrides or {}).items()}
        self.fail_at: dict[str, int] = {}  # model name → raise on the n-th request of it (1-based)
        self.seen: dict[str, int] = {}

    def _reply(self, req) -> str:
        name = req.response_format["json_schema"]["name"]
        self.seen[name] = self.seen.get(name, 0) + 1
        if self.fail_at.get(name) == self.seen[name]:
            from backends.llm.errors import BadRequest

            raise BadRequest("scripted failure")
        if self.overrides.get(name):
            return self.overrides[name].pop(0)
        return json.dumps(answer(req), ensure_ascii=False)

    def names(self) -> list[str]:
        return [r.response_format["json_schema"]["name"] for r in self.requests]


def make_llm(home, fake: ScriptedLLM) -> LLMClient:
    ws = make_workspace(home, env={"PAL_DEFAULT_MAX_RETRIES": "0"})
    return ws.llm(session_id="test", providers=dict.fromkeys(ROLES, fake))
