"""Reading a scripted LLM's requests: which schema, which prompt, which section of it."""

from __future__ import annotations

import re

from backends.llm.types import ChatRequest


def schema_name(req: ChatRequest) -> str:
    """The structured-output model a request asks for (its JSON schema name)."""
    if req.response_format and "json_schema" in req.response_format:
        return req.response_format["json_schema"]["name"]
    m = re.search(r'"title":"(\w+)"}?$', req.messages[0].content)
    return m.group(1) if m else ""


def prompt_text(req: ChatRequest) -> str:
    """The rendered prompt (the first user message; correction turns come after it)."""
    return next(m.content for m in req.messages if m.role == "user")


def section(prompt: str, title: str) -> str:
    """The text of a prompt section "Title:\\n…" up to the next blank line."""
    m = re.search(rf"{re.escape(title)}:\n(.*?)(?:\n\n|\Z)", prompt, re.S)
    return m.group(1) if m else ""
