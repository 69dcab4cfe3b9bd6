"""The generic hook: a memory method with its own model answers the ``assistant`` role in Simulate and the
single-turn tasks; every other role, the cache, the records and the run ids stay the client's."""

from __future__ import annotations

import json

from backends.config import ROLES
from backends.embeddings import HashEmbedder
from backends.llm.fake import ScriptedLLM
from backends.vectorstore import BruteForceStore
from evaluation.service import topic_context
from evaluation.tasks import TopicTasks
from memory.base import MemoryMethod, assistant_client
from memory.build import MemoryBuilder
from memory.methods import METHODS
from memory.types import PromptBlock
from sim.service import make_spec
from testkit.workspace import make_workspace
from tests.sim.conftest import default_reply

MARKER = "WEIGHTS-ANSWER"
SEEN: list[object] = []


class WeightsProvider(ScriptedLLM):
    """Stands in for a model that carries the memory in its weights."""

    name = "weights"
    role_overrides = {"model": "weights/tiny", "structured_mode": "prompt"}

    def __init__(self, current):
        super().__init__(self.answer)
        self.current = current
        self.endpoint = f"weights://user@{current.sample_id if current else 'latest'}"

    @staticmethod
    def answer(req) -> str:
        schema = "\n".join(m.content for m in req.messages)  # prompt mode: the schema ends the last user message
        if '"choices"' in schema:
            return json.dumps({"analysis": "S1 and S8 fit the weights best.", "choices": ["S1", "S8"]})
        if '"requirement"' in schema:
            return json.dumps({"requirement": f"{MARKER} restated"})
        if '"solution"' in schema:
            return json.dumps({"solution": f"{MARKER} proposed"})
        return f"{MARKER} reply"


class WeightsMethod(MemoryMethod):
    name = "weights-test"
    label = "Memory in the weights (test)"
    uses_query = False

    def retrieve(self, query, purpose, memory, current):
        return self.trace(query, purpose, current, [], [PromptBlock(title="Memory", text="in the weights")])

    def assistant_provider(self, current=None):
        provider = WeightsProvider(current)
        SEEN.append(provider)
        return provider


def client(home, fake):
    return make_workspace(home).llm(session_id="hook", providers=dict.fromkeys(ROLES, fake))


def builder_for(home, dataset, user_id, llm):
    emb = HashEmbedder()
    return MemoryBuilder("demo", dataset.users[user_id], "weights-test", make_workspace(home).memory,
                         BruteForceStore(emb), emb, llm=llm)


def test_with_provider_overrides_one_role_and_shares_the_rest(tmp_path):
    fake, other = ScriptedLLM(lambda r: "main"), WeightsProvider(None)
    llm = client(tmp_path, fake).for_run("r1")
    over = llm.with_provider("assistant", other, **other.role_overrides)
    assert over.provider("assistant") is other and over.provider("judge") is fake
    assert over.store is llm.store and over.cache is llm.cache
    assert over.config.role("assistant").model == "weights/tiny" and llm.config.role("assistant").model != "weights/tiny"
    assert over.chat("assistant", [{"role": "user", "content": "hi"}]).text == f"{MARKER} reply"
    assert over.chat("judge", [{"role": "user", "content": "hi"}]).text == "main"
    over.for_run("r2").chat("assistant", [{"role": "user", "content": "again"}])  # a run-scoped view keeps the override
    rows = llm.store.calls("hook")[::-1]  # newest first
    assert [(r["role"], r["provider"], r["model"], r["run_id"]) for r in rows] == [
        ("assistant", "weights", "weights/tiny", "r1"), ("judge", "fake", llm.config.role("judge").model, "r1"),
        ("assistant", "weights", "weights/tiny", "r2")]
    assert over.chat("assistant", [{"role": "user", "content": "hi"}]).cache_hit  # cached by the provider's endpoint
    assert assistant_client(llm, None) is llm


def test_simulation_uses_the_methods_provider_for_the_assistant(tmp_path, monkeypatch, demo_dataset):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    monkeypatch.setitem(METHODS, "weights-test", f"{__name__}:WeightsMethod")
    SEEN.clear()
    fake = ScriptedLLM(default_reply)
    llm = client(tmp_path, fake)
    spec = make_spec(demo_dataset, "1000", "1000_sample7", "topic-1", "weights-test")
    sim = make_workspace(tmp_path).open_simulation(demo_dataset, spec, llm,
                                                   builder=builder_for(tmp_path, demo_dataset, "1000", llm))
    record = sim.run()
    assert record.status == "finished"
    assert record.settings["assistant"]["model"] == "weights/tiny"  # the run records who really answered
    said = [u for u in record.utterances if u.side == "assistant"]
    assert said and all(u.content == f"{MARKER} reply" and u.model == "weights/tiny" for u in said)
    assert all(u.content.endswith(").") for u in record.utterances if u.side == "user")
    # every try of every assistant turn went to the provider (the same short reply a third time is asked again)
    assert SEEN[-1].current.sample_id == "1000_sample7" and len(SEEN[-1].requests) == sum(u.attempts for u in said)
    assert not any("You are a personal assistant" in (r.messages[0].content if r.messages else "") for r in fake.requests)
    roles = {(r["role"], r["provider"]) for r in llm.store.calls("hook", limit=1000)}
    assert roles == {("assistant", "weights"), ("user_simulator", "fake")}


def test_single_turn_tasks_use_the_methods_provider(tmp_path, monkeypatch, demo_dataset):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    monkeypatch.setitem(METHODS, "weights-test", f"{__name__}:WeightsMethod")
    SEEN.clear()
    judge = ScriptedLLM(lambda r: json.dumps({"analysis": "fine", "score": 1.5}))
    llm = client(tmp_path, judge)
    ctx = topic_context(demo_dataset, "1000", "1000_sample7", "topic-1")
    runner = TopicTasks(llm, ctx, "weights-test", builder_for(tmp_path, demo_dataset, "1000", llm), "demo")
    results = {r.task: r for r in runner.run()}
    assert results["restatement"].prediction == f"{MARKER} restated" and results["restatement"].g_score == 1.5
    assert results["proposal"].prediction == f"{MARKER} proposed"
    assert results["selection"].picks == ["S1", "S8"] and results["selection"].s_score == 2
    assert {r.model for r in results.values()} == {"weights/tiny"}
    assert all(r.ok for r in results.values())
    assert all("must match this JSON schema" in r.messages[-1].content for r in SEEN[-1].requests)  # no grammar: full schema
    assert len(judge.requests) == 1  # only the G-score judge went to the configured LLM
