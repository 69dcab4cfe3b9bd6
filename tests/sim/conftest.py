"""Fixtures for simulation tests: a scripted LLM that knows which side is asking, over a filler or demo dataset."""

from __future__ import annotations

import json

import pytest

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from backends.llm.types import ChatRequest
from testkit.workspace import make_workspace


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
def sim_ws(tmp_path, monkeypatch):
    """The workspace over a temporary PAL_HOME (configuration: defaults only)."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return make_workspace(tmp_path / "pal")


@pytest.fixture
def sim_env(sim_ws):
    """(make_llm(reply), SimStore) over the temporary workspace."""

    def make_llm(reply=default_reply):
        fake = ScriptedLLM(reply)
        return sim_ws.llm(session_id="simtest", providers=dict.fromkeys(ROLES, fake)), fake

    make_llm.ws = sim_ws  # the workspace, for opening simulations and batches
    return make_llm, sim_ws.sims
