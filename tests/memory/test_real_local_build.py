"""One real H²Memory build with a local model (SmolLM2-135M by default, ``tests.conftest.local_model_env``; it also
runs on Qwen2.5-Coder-0.5B): the first session of a demo user, end to end through the platform — every LLM step has a
bounded schema, so even the tiny model completes it. And the memory-builder role once on the default model."""

import pytest

from memory.store import dialogue_stage
from palset.loader import load_dataset
from sim.persona_check import in_language
from testkit.workspace import make_workspace
from tests.conftest import DEFAULT_MODEL, DEMO, local_model_env

pytestmark = [pytest.mark.slow(seconds=120), pytest.mark.local_model]


def test_h2memory_builds_a_demo_session_with_the_local_model(local_servers, tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    user = load_dataset(DEMO).users["1005"]
    # 1,024 answer tokens: a topic outline (up to 3 topics × 4 solutions) fits in one reply, where 512 cut it off
    # three times over (three tries, then the fallback)
    env = {"PAL_DEFAULT_TIMEOUT": "600", "PAL_MEMORY_BUILDER_MAX_TOKENS": "1024", **local_model_env()}
    ws = make_workspace(tmp_path, env=env, servers=local_servers)  # CPU may be shared in CI
    llm = ws.llm()
    builder = ws.open_user_builder("demo", user, "h2memory", llm=llm, embedder="minilm")
    info = builder.run(until_session=0)
    assert info.stages_done == 2 and info.llm_calls >= 4 and info.tokens_out > 0
    items = builder.store.items_as_of(builder.build_id, dialogue_stage(0))
    layers = {i.layer for i in items}
    assert {"log_graph", "situation", "background", "topic_outline"} <= layers
    assert all(i.text for i in items if i.layer in ("situation", "topic_outline"))
    calls = llm.store.calls(limit=1000)
    assert {c["prompt_name"] for c in calls} >= {"memory/h2_log_graph", "memory/h2_situation", "memory/h2_background",
                                                 "memory/h2_topic_outline", "memory/h2_refine"}
    trace = builder.retrieve(user.sessions[0].topics[0].topic.user_query, "solution", user.sessions[0])
    assert trace.blocks and trace.tokens > 0


@pytest.mark.slow(seconds=60)
def test_the_memory_builder_summarises_a_chinese_session_on_the_default_model(local_servers, tmp_path, monkeypatch):
    """The memory-builder role on the default model: RecurSum's log and dialogue summaries of
    user 1006's first session, in Chinese and within their bound (160 characters: short, so the test is)."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    env = {"PAL_DEFAULT_TIMEOUT": "600", **local_model_env(DEFAULT_MODEL)}
    ws = make_workspace(tmp_path, env=env, servers=local_servers)
    llm = ws.llm(session_id="default-memory")
    user = load_dataset(DEMO).users["1006"]
    builder = ws.open_user_builder("demo", user, "recursum", llm=llm, method_config={"summary_chars": 160})
    info = builder.run(until_session=0)
    assert info.stages_done == 2 and info.llm_calls >= 2
    items = {i.layer: i for i in builder.store.items_as_of(builder.build_id, dialogue_stage(0))}
    assert {"summary", "log_summary"} <= set(items)
    for item in items.values():
        assert 0 < len(item.text) <= 160 and in_language(item.text, "zh"), item.text
    assert {c["model"] for c in llm.store.calls("default-memory", limit=100)} == {DEFAULT_MODEL}
