"""Reading a scripted LLM's requests: which schema, which prompt, which section of it."""

from __future__ import annotations

import re

from backends.llm.types import ChatRequest


def schema_name(req: ChatRequest) -> str:
    """The structured-output model a request asks for (its JSON schema name)."""
    if req.response_format and "json_schema" in req.response_format:
        return req.response_format["json_schema"]["name"]
    for m in req.messages:  # prompt mode: the schema is in the instructions at the end of a user message
        found = re.search(r'"title":"(\w+)"}?$', m.content)
        if found:
            return found.group(1)
    return ""


def prompt_text(req: ChatRequest) -> str:
    """The rendered prompt: its system message and first user message (correction turns come after it)."""
    system = "".join(m.content + "\n\n" for m in req.messages[:1] if m.role == "system")
    return system + next(m.content for m in req.messages if m.role == "user")


def all_text(req: ChatRequest) -> str:
    """Every message of the request, one after another (what a fake reads to tell the roles apart)."""
    return "\n\n".join(m.content for m in req.messages)


def section(prompt: str, title: str) -> str:
    """The text of a prompt section "Title:\\n…" up to the next blank line."""
    m = re.search(rf"{re.escape(title)}:\n(.*?)(?:\n\n|\Z)", prompt, re.S)
    return m.group(1) if m else ""


def role_of(req: ChatRequest) -> str:
    """Which dialogue role a request is from, by the prompts' own words: ``simulator`` (the User-LLM), ``summary``
    (the assistant's query summary), ``assistant``, ``judge`` (FairEval), or ``""``."""
    system = req.messages[0].content if req.messages and req.messages[0].role == "system" else ""
    last = next((m.content for m in reversed(req.messages) if m.role == "user"), "")
    if "chat messages that" in system or "发给私人助手App的聊天消息" in system:
        return "simulator"
    if "what does the user need" in last or "用一句话概括用户需要什么" in last:
        return "summary"
    if system.startswith(("You are a personal assistant app", "你是一个私人助手App")):
        return "assistant"
    if system.startswith(("You are a fair judge", "You are an excellent dialogue evaluator", "你是一个良好的对话评价器")):
        return "judge"  # the compact wording, the Mem-PAL authors' prompt in English and in their Chinese
    return ""


def act_of(req: ChatRequest) -> str:
    """The act a dialogue role's request asks for: the act named last in its last user message (English name)."""
    from palset.vocab import Act

    last = next((m.content for m in reversed(req.messages) if m.role == "user"), "")
    found = [(max(last.rfind(a.value), last.rfind(a.zh)), a.value) for a in Act]
    position, name = max(found)
    return name if position >= 0 else "?"


def wants_json(req: ChatRequest) -> bool:
    """Whether the request asks for JSON (a structured call: response_format, or the schema in the prompt)."""
    return bool(req.response_format) or any("Reply with one JSON object" in m.content for m in req.messages)


def act_code(act: str) -> str:
    """An act's initials ("Topic Inquiry" → "TI"): what a fake puts in its answer (the full name would echo the cue)."""
    return "".join(word[0] for word in act.split()) if act != "?" else "?"


USER_LINES = ("I need some help sorting this out", "Yes, that is exactly what worries me",
              "Right, and my time is really short", "But how would I fit that into a busy weekday",
              "That works for me, thanks", "No, that does not suit me at all", "Fine, I can live with that plan",
              "Okay, let me think about it")


def user_line(req: ChatRequest) -> str:
    """A fake User-LLM's words for this turn: a different sentence each turn (a user repeating a line is asked
    again, see sim.persona_check), ending with the act's initials."""
    chat = next((m.content for m in reversed(req.messages) if m.role == "user"), "")
    turn = sum(line.startswith(("Assistant:", "助手：")) for line in chat.splitlines())
    return f"{USER_LINES[turn % len(USER_LINES)]} ({act_code(act_of(req))})."
