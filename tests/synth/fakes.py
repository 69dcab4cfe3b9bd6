"""A scripted synthesizer for tests: builds a valid answer from the JSON schema each request carries.

Every structured request names its reply model and schema (``response_format``); the filler walks the
schema — enums cycle in order (months, requirement ids, S1…S8 come out distinct and in order), strings
are unique and as long as required — and log timestamps are placed inside the span the prompt names.
``overrides`` maps a reply model name to a list of raw texts served first (to script invalid answers).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from backends.config import ROLES
from backends.llm.client import LLMClient
from backends.llm.fake import ScriptedLLM
from testkit.schema_fill import schema_answer
from testkit.workspace import make_workspace

_serial = itertools.count(1)


def answer(req) -> dict[str, Any]:
    """A valid answer to ``req`` (strings numbered by one counter over every request of the test session)."""
    fmt = req.response_format["json_schema"]
    return schema_answer(fmt["name"], fmt["schema"], req.messages[1].content, _serial)


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
