"""Fixtures for simulation tests: a scripted LLM that knows which side is asking, over a filler or demo dataset."""

from __future__ import annotations

import json

import pytest

from backends.config import ROLES, load_config
from backends.llm.client import LLMClient
from backends.llm.fake import ScriptedLLM
from backends.llm.types import ChatRequest
from backends.store.cache import ResponseCache
from backends.store.runstore import RunStore
from sim.store import SimStore


def side_of(req: ChatRequest) -> str:
    text = req.messages[-1].content if req.messages else ""
    first = next((m.content for m in req.messages if m.role == "user"), "")
    if "You are simulating a real person" in first:
        return "user"
    if "what does the user need" in first:
        return "summary"
    return "assistant" if "You are a personal assistant" in first else text


def default_reply(req: ChatRequest) -> str:
    side = side_of(req)
    if side == "user":
        act = first_line_after(req, "Act: ")
        return json.dumps({"content": f"user says ({act})"})
    if side == "summary":
        return json.dumps({"query": "help with sleep"})
    return f"assistant answers ({first_line_after(req, 'Act: ')})"


def first_line_after(req: ChatRequest, marker: str) -> str:
    text = next((m.content for m in req.messages if m.role == "user"), "")
    return text.split(marker, 1)[1].split(".", 1)[0] if marker in text else "?"


@pytest.fixture
def sim_env(tmp_path, monkeypatch):
    """(make_llm(reply), SimStore) over a temporary PAL_HOME."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))

    def make_llm(reply=default_reply):
        fake = ScriptedLLM(reply)
        llm = LLMClient(load_config(secrets={}, env={}), store=RunStore(tmp_path / "pal" / "runs.sqlite"),
                        cache=ResponseCache(tmp_path / "pal" / "cache.sqlite"), providers=dict.fromkeys(ROLES, fake),
                        session_id="simtest")
        return llm, fake

    return make_llm, SimStore(tmp_path / "pal" / "runs.sqlite")
