"""Fixtures for simulation tests: a scripted LLM that knows which side is asking, over a filler or demo dataset."""

from __future__ import annotations

import json

import pytest

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from backends.llm.types import ChatRequest
from palset.loader import load_dataset
from sim.service import make_spec
from testkit.requests import act_code, act_of, role_of, user_line, wants_json
from testkit.workspace import make_workspace
from tests.conftest import DEMO


def side_of(req: ChatRequest) -> str:
    """``user`` (the User-LLM), ``summary``, ``assistant``, or the last message's text for anything else."""
    role = role_of(req)
    if role in ("summary", "assistant"):
        return role
    if role == "simulator":
        return "user"
    return req.messages[-1].content if req.messages else ""


def user_says(req: ChatRequest, text: str) -> str:
    """What a fake User-LLM answers: ``text`` as JSON in free mode (a structured call), plain in fixed mode."""
    return json.dumps({"content": text}) if wants_json(req) else text


def default_reply(req: ChatRequest) -> str:
    side = side_of(req)
    if side == "user":
        return user_says(req, user_line(req))
    if side == "summary":
        return "help with sleep"
    return f"assistant answers ({act_code(act_of(req))})"  # initials: an act's name is the prompt's term


@pytest.fixture
def sim_ws(tmp_path, monkeypatch):
    """The workspace over a temporary PAL_HOME (configuration: defaults, but the hash embedder: retrieval is
    exercised, not its quality — real embeddings are tested in tests/backends and tests/cli)."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})


@pytest.fixture
def sim_env(sim_ws):
    """(make_llm(reply), SimStore) over the temporary workspace."""

    def make_llm(reply=default_reply, cut=False):
        fake = ScriptedLLM(reply, cut=cut)
        return sim_ws.llm(session_id="simtest", providers=dict.fromkeys(ROLES, fake)), fake

    make_llm.ws = sim_ws  # the workspace, for opening simulations and batches
    return make_llm, sim_ws.sims


@pytest.fixture(scope="module")
def demo():
    """The demo dataset (data/demo), loaded once per module."""
    return load_dataset(DEMO)


def sim_for(demo, make_llm, store, method="vanilla-log", reply=default_reply, **kw):
    """A simulation of user 1000's first query topic with the scripted LLM ``reply`` (and that fake)."""
    llm, fake = make_llm(reply)
    spec = make_spec(demo, "1000", "1000_sample7", "topic-1", method, **kw)
    return make_llm.ws.open_simulation(demo, spec, llm), fake


def finished_run(sim_env, reply, **spec_options):
    """User 1000's first query topic simulated against the fake ``reply`` (vanilla memory), run to its end."""
    make_llm, _ = sim_env
    demo = load_dataset(DEMO)
    llm, _fake = make_llm(reply)
    spec = make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla", **spec_options)
    record = make_llm.ws.open_simulation(demo, spec, llm).run()
    assert record.status == "finished", record.error
    return record, demo.users["1000"].session("1000_sample7").topics[0]
