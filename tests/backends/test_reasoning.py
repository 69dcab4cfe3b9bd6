"""Reasoning kept apart: <think> blocks and reasoning_content never reach the answer, streamed or not; recorded."""

import random

import pytest
from pydantic import BaseModel, Field

from backends.llm.reasoning import ReasoningSplitter, guess_switch, split_reasoning, thinking_off_body
from testkit.fake_endpoints import LEAK, THOUGHT, FakeEndpoint
from testkit.workspace import make_workspace


class Turn(BaseModel):
    content: str = Field(max_length=100)


MSG = [{"role": "user", "content": "say something"}]


def client_for(server, home, **env):
    env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "qwen3-8b",
           "PAL_DEFAULT_MAX_RETRIES": "0", **env}
    return make_workspace(home, env=env).llm(session_id="think")


@pytest.mark.parametrize("text, answer, reasoning", [
    ("<think>a {\"x\": 1}</think>\n{\"y\": 2}", '{"y": 2}', 'a {"x": 1}'),
    ("<THINKING>plan</THINKING>Hello", "Hello", "plan"),
    ("inside already</think>\n\nHello", "Hello", "inside already"),  # the template opened the block
    ("<think>ran out of tokens", "", "ran out of tokens"),
    ("<think>one</think> <think>two</think> done", "done", "one\n\ntwo"),
    ("no thinking at all", "no thinking at all", ""),
    ("2 < 3 and 4 > 1", "2 < 3 and 4 > 1", ""),
])
def test_split_reasoning(text, answer, reasoning):
    assert split_reasoning(text) == (answer, reasoning)


def test_stream_splitter_never_emits_thinking_wherever_the_tags_are_cut():
    text = f"<think>{THOUGHT}</think>\n\nThe answer <b>is</b> here."
    rng = random.Random(0)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(text)), 8))
        parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        splitter = ReasoningSplitter()
        out = "".join(splitter.feed(p) for p in parts) + splitter.finish()
        assert out == "The answer <b>is</b> here." and splitter.text == THOUGHT


def test_a_held_stream_releases_the_answer_after_template_opened_thinking():
    text = f"{THOUGHT}</think>\n\nThe answer."
    for size in (1, 3, 7, len(text)):
        splitter = ReasoningSplitter(hold=True)
        out = "".join(splitter.feed(text[i:i + size]) for i in range(0, len(text), size)) + splitter.finish()
        assert out == "The answer." and splitter.text == THOUGHT
    plain = ReasoningSplitter(hold=True)
    assert plain.feed("no thinking here") == "" and plain.finish() == "no thinking here"
    tagged = ReasoningSplitter(hold=True)
    assert tagged.feed("<think>x</think>Now") == "Now"


@pytest.mark.parametrize("think, model", [("content", "qwen3-8b"), ("field", "qwen3-8b"), ("both", "qwen3-8b"),
                                          ("headless", "deepseek-r1-distill-qwen-7b")])
@pytest.mark.parametrize("streamed", [False, True])
def test_chat_and_stream_keep_reasoning_apart_and_record_it(pal_home, think, model, streamed):
    with FakeEndpoint(think=think).running() as server:
        client = client_for(server, pal_home, PAL_DEFAULT_MODEL=model)
        if streamed:
            chunks = list(client.stream("assistant", MSG, use_cache=False))
            deltas, result = "".join(c for c in chunks if isinstance(c, str)), chunks[-1]
            assert LEAK not in deltas and deltas.strip() == "a plain answer"
        else:
            result = client.chat("assistant", MSG, use_cache=False)
    assert result.text == "a plain answer" and result.reasoning == THOUGHT
    assert result.reasoning_tokens > 0
    row = client.store.calls("think")[0]
    assert row["reasoning_tokens"] == result.reasoning_tokens
    assert row["reasoning_counter"] == ("endpoint" if think in ("field", "both") else result.reasoning_counted_by)
    assert client.store.reasoning(session_id="think")[0]["text"] == THOUGHT


@pytest.mark.parametrize("think", ["content", "headless", "field"])
def test_structured_answers_never_parse_the_thinking(pal_home, think):
    with FakeEndpoint(think=think).running() as server:
        client = client_for(server, pal_home)
        out = client.structured("user_simulator", MSG, Turn, use_cache=False)
        assert out.ok and LEAK not in out.value.content and LEAK in out.reasoning
        out2 = client.structured("user_simulator", [{"role": "user", "content": "again"}], Turn, use_cache=False)
        assert out2.ok
        assert all(LEAK not in m["content"] for r in server.requests for m in r["messages"])  # never sent back


def test_cached_answers_keep_their_reasoning(pal_home):
    with FakeEndpoint(think="content").running() as server:
        client = client_for(server, pal_home)
        client.chat("assistant", MSG)
        hit = client.chat("assistant", MSG)
    assert hit.cache_hit and hit.text == "a plain answer" and hit.reasoning == THOUGHT


def test_thinking_off_sends_the_vendor_switch(pal_home):
    with FakeEndpoint().running() as server:
        client_for(server, pal_home, PAL_DEFAULT_THINKING="off").chat("assistant", MSG, use_cache=False)
        client_for(server, pal_home, PAL_DEFAULT_THINKING="off", PAL_DEFAULT_THINKING_SWITCH="enable_thinking") \
            .chat("assistant", [{"role": "user", "content": "2"}], use_cache=False)
        client_for(server, pal_home).chat("assistant", [{"role": "user", "content": "3"}], use_cache=False)
    assert server.requests[0]["chat_template_kwargs"] == {"enable_thinking": False}
    assert server.requests[1]["enable_thinking"] is False
    assert "chat_template_kwargs" not in server.requests[2] and "enable_thinking" not in server.requests[2]


def test_switch_guesses():
    assert guess_switch("Qwen/Qwen3-8B", "http://vllm:8000/v1") == "chat_template_kwargs"
    assert guess_switch("qwen-plus", "https://dashscope.aliyuncs.com/compatible-mode/v1") == "enable_thinking"
    assert guess_switch("deepseek-reasoner", "https://api.deepseek.com/v1") == "none"
    assert guess_switch("deepseek-ai/DeepSeek-V3.1", "http://sglang/v1") == "deepseek_template"
    assert thinking_off_body("gpt-5-mini", None)[0] == {"reasoning_effort": "minimal"}
    assert thinking_off_body("o3-mini", None)[0] == {"reasoning_effort": "low"}
    assert guess_switch("SmolLM2-135M-Instruct", None) == "none"
