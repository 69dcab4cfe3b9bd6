"""Fixtures for evaluation tests: a scripted LLM over a temporary PAL_HOME, demo runs stored directly."""

from __future__ import annotations

import json
import re

import pytest

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from backends.llm.types import ChatRequest
from palset.dataset import dataset_key
from palset.loader import load_dataset
from palset.vocab import Act
from sim.store import SimStore, run_id_for
from sim.types import RunRecord, RunSpec, Utterance
from testkit.workspace import make_workspace
from tests.conftest import DEMO

MARKER = "ZEBRA"
USER, SAMPLE, TOPIC = "1000", "1000_sample7", "topic-1"


@pytest.fixture(scope="session")
def demo():
    return load_dataset(DEMO)


@pytest.fixture
def eval_ws(tmp_path, monkeypatch):
    """The workspace over a temporary PAL_HOME (configuration: defaults only)."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return make_workspace(tmp_path / "pal")


@pytest.fixture
def env(eval_ws):
    """(make_llm(reply) → (LLMClient, ScriptedLLM), SimStore, workspace) over a temporary PAL_HOME."""

    def make_llm(reply):
        fake = ScriptedLLM(reply)
        return eval_ws.llm(session_id="evaltest", providers=dict.fromkeys(ROLES, fake)), fake

    return make_llm, eval_ws.sims, eval_ws


def store_run(sims: SimStore, method: str, words: str, user=USER, sample=SAMPLE, topic=TOPIC) -> RunRecord:
    """A finished run whose assistant turns contain ``words`` (e.g. the marker)."""
    spec = RunSpec(dataset=dataset_key(DEMO), user_id=user, sample_id=sample, topic_key=topic, method=method)
    rec = sims.create(RunRecord(run_id=run_id_for(spec), spec=spec))
    turns = [("user", Act.TOPIC_INQUIRY, "I need help with my rota."),
             ("assistant", Act.REQUIREMENT_PREDICTION, f"Do you need a swap partner? {words}"),
             ("user", Act.REQUIREMENT_CONFIRMATION, "Yes, for Boxing Day."),
             ("assistant", Act.SOLUTION_PROPOSAL, f"Ask Aisha to swap. {words}")]
    for i, (side, act, text) in enumerate(turns):
        sims.add_utterance(rec.run_id, Utterance(turn_no=i // 2, side=side, actor="simulator", act=act, content=text))
    sims.set_status(rec.run_id, "finished")
    return sims.load(rec.run_id)


def slots(req: ChatRequest) -> tuple[str, str]:
    """The assistant-1 and assistant-2 dialogue texts of a judge request."""
    text = next(m.content for m in req.messages if m.role == "user")
    m = re.search(r"## assistant-1\n(.*?)\n+## assistant-2\n(.*?)(\n+#|$)", text, re.S)
    assert m, "judge prompt lacks the two dialogues"
    return m.group(1), m.group(2)


def judge_reply(s1: int, s2: int) -> str:
    return json.dumps({"analysis": {"assistant-1": "a1", "assistant-2": "a2", "overall": "o"},
                       "scores": {"assistant-1": s1, "assistant-2": s2}})


def prefers_first(req: ChatRequest) -> str:
    return judge_reply(8, 5)


def prefers_marker(req: ChatRequest) -> str:
    first, _ = slots(req)
    return judge_reply(9, 4) if MARKER in first else judge_reply(4, 9)
