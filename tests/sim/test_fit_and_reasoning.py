"""Simulations against endpoints labs use: a reasoning model (thinking in <think> tags or reasoning_content,
streamed and not) and a small context window (the full history is trimmed, oldest sessions first)."""

import pytest

from backends.config import ROLES, output_tokens
from backends.embeddings import HashEmbedder
from backends.llm.context import describe_cuts
from backends.llm.fake import ScriptedLLM
from backends.vectorstore import BruteForceStore
from memory.build import MemoryBuilder
from palset.loader import load_dataset
from sim.service import make_spec
from sim.simulator import ASSISTANT_TURN_TOKENS, USER_TURN_TOKENS
from testkit.fake_endpoints import LEAK, THOUGHT, FakeEndpoint
from testkit.workspace import make_workspace
from tests.conftest import DEMO
from tests.sim.conftest import default_reply


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


def endpoint_client(server, home):
    env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "qwen3",
           "PAL_DEFAULT_MAX_RETRIES": "0"}
    return make_workspace(home, env=env).llm(session_id="sim-think")


@pytest.mark.parametrize("think", ["content", "field", "both", "headless"])
def test_reasoning_never_becomes_an_utterance_or_a_prompt(demo, tmp_path, monkeypatch, think):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    with FakeEndpoint(think=think).running() as server:
        llm = endpoint_client(server, tmp_path)
        sim = make_workspace(tmp_path).open_simulation(
            demo, make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla"), llm)
        record = sim.run()
        # fixed mode: both sides stream plain text (a judging turn's decision, sim.decision, is asked as JSON)
        decisions = [r for r in server.requests if "just guessed" in r["messages"][-1]["content"]
                     or "just suggested" in r["messages"][-1]["content"]]
        assert all(r.get("stream") for r in server.requests if r not in decisions)
    assert record.status == "finished", record.error
    assert len(record.utterances) == 2 * len(record.schedule)
    for u in record.utterances:
        assert LEAK not in u.content and LEAK not in (u.prompt or "")
        assert u.reasoning == THOUGHT
    assert all(LEAK not in m["content"] for r in server.requests for m in r["messages"])
    stored = make_workspace(tmp_path).sims.load(record.run_id)
    assert all(u.reasoning == THOUGHT for u in stored.utterances)
    rows = llm.store.reasoning(session_id="sim-think", limit=100)
    # one call per attempt (the endpoint answers both sides alike, so the simulator's echoes of the assistant are
    # asked again: sim.persona_check)
    assert len(rows) == sum(u.attempts for u in record.utterances)
    assert all(r["text"] == THOUGHT and r["reasoning_tokens"] > 0 for r in rows)


def test_full_history_is_trimmed_to_the_window_and_the_cut_is_on_the_trace(demo, tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    fake = ScriptedLLM(default_reply, window=4096)
    ws = make_workspace(tmp_path)
    llm = ws.llm(session_id="w", providers=dict.fromkeys(ROLES, fake))
    user = demo.users["1000"]
    embedder = HashEmbedder()
    builder = MemoryBuilder("demo", user, "full-history", ws.memory, BruteForceStore(embedder), embedder)
    builder.run()
    spec = make_spec(demo, "1000", "1000_sample7", "topic-1", "full-history")
    record = ws.open_simulation(demo, spec, llm, builder=builder).run()
    assert record.status == "finished", record.error
    budget = llm.budget("assistant")
    assert all(budget.count_messages(req.messages) <= budget.limit for req in fake.requests)
    answers = [u for u in record.utterances if u.side == "assistant"]
    for u in answers:
        cuts = u.trace["cuts"]
        assert cuts and cuts[0]["unit"] == "sessions" and cuts[0]["removed"][0] == "1000_sample0"
        assert "1000_sample6" not in cuts[0]["removed"] and "## 1000_sample6 logs" in u.prompt  # newest kept
        assert describe_cuts(cuts).startswith("trimmed ")
        assert u.trace["full_history_tokens"] > u.trace["tokens"]
    rows = llm.store.calls("w")
    assert all(r["fit_note"] and "sessions 1000_sample0" in r["fit_note"] for r in rows if r["role"] == "assistant")
    # each role's own answer budget at this window; a user turn one short sentence and an assistant turn a few
    # (sim.simulator.USER_TURN_TOKENS, ASSISTANT_TURN_TOKENS); anything else its role's own budget
    def expected(r):
        if r["role"] == "user_simulator":
            return USER_TURN_TOKENS
        return ASSISTANT_TURN_TOKENS if r["prompt_name"] == "sim/assistant" else output_tokens(r["role"], 4096)

    assert "sim/assistant" in {r["prompt_name"] for r in rows if r["role"] == "assistant"}
    assert all(r["context_window"] == 4096 and r["max_tokens"] == expected(r) for r in rows)


def test_a_long_dialogue_loses_its_oldest_utterances(demo, tmp_path, monkeypatch):
    from palset.vocab import Act
    from sim.fit import fit_prompt
    from sim.types import Utterance

    fake = ScriptedLLM(default_reply, window=900)
    llm = make_workspace(tmp_path, secrets={"cache": False}, env={"PAL_DEFAULT_MAX_TOKENS": "200"}).llm(
        session_id="w", providers=dict.fromkeys(ROLES, fake))
    history = [Utterance(turn_no=i // 2 + 1, side="user" if i % 2 == 0 else "assistant", actor="simulator",
                         act=Act.TOPIC_INQUIRY, content=f"utterance number {i} " + "words " * 40) for i in range(20)]
    fitted = fit_prompt(llm.budget("user_simulator"), lambda _m, d: f"Instructions.\n{d}", history)
    budget = llm.budget("user_simulator")
    assert budget.count_messages([{"role": "user", "content": fitted.text}]) <= budget.limit
    assert "utterance number 19" in fitted.text and "utterance number 0 " not in fitted.text
    assert fitted.cuts[0].unit == "utterances" and fitted.cuts[0].removed[0] == "1"
    assert "earlier utterance(s) left out" in fitted.text
