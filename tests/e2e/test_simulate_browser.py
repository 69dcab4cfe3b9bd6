"""End to end: the Simulate page in headless Chromium, every role pointed at a local fake OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest

from palset.loader import load_dataset
from sim.schedule import fixed_schedule
from sim.service import make_spec
from sim.store import run_id_for
from testkit.browser import browser_page, chromium_available, running_app
from testkit.fault_server import FaultServer, completion
from testkit.requests import USER_LINES, act_code
from tests.conftest import DEMO
from tests.pages.apptest import app_workspace

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]

UID, SAMPLE, TOPIC = "1001", "1001_sample7", "topic-1"
CHAT = "[data-testid='stChatMessage']"


def _act(body: dict) -> str:
    """The act a request asks for: the one its last user message names last (as testkit.requests.act_of)."""
    from palset.vocab import Act

    last = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
    position, name = max((max(last.rfind(a.value), last.rfind(a.zh)), a.value) for a in Act)
    return name if position >= 0 else "?"


def _sse(text: str, model: str) -> bytes:
    """A chat-completions stream: one chunk per word, a final chunk with the finish reason, then [DONE]."""
    def chunk(delta: dict, finish: str | None = None) -> str:
        return "data: " + json.dumps({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": model,
                                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

    words = [w + " " for w in text.split(" ")]
    body = chunk({"role": "assistant", "content": ""}) + "".join(chunk({"content": w}) for w in words)
    return (body + chunk({}, "stop") + "data: [DONE]\n\n").encode()


def fake_llm(body: dict) -> tuple[int, dict, bytes]:
    """The User-LLM's words (plain, streamed in fixed mode), a streamed sentence for the assistant."""
    model = body.get("model", "fake")
    system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    if "chat messages that" in system:  # the User-LLM: plain text in fixed mode, JSON when it is a structured call
        chat = body["messages"][-1]["content"]
        turn = sum(line.startswith("Assistant:") for line in chat.splitlines())  # a new line each turn (no echo)
        words = f"{USER_LINES[turn % len(USER_LINES)]} (" + "".join(w[0] for w in _act(body).split()) + ")"
        text = json.dumps({"content": words}) if body.get("response_format") else words
    else:
        text = f"assistant answers ({act_code(_act(body))}) politely"
    if body.get("stream"):
        return 200, {"content-type": "text/event-stream"}, _sse(text, model)
    return 200, {"content-type": "application/json"}, json.dumps(completion(text, model)).encode()


@pytest.fixture
def fake_server():
    server = FaultServer(default=fake_llm)
    with server.running():
        yield server


@pytest.fixture
def app_env(tmp_path, monkeypatch, fake_server) -> dict[str, str]:
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_DEFAULT_PROVIDER": "openai",
           "PAL_DEFAULT_BASE_URL": fake_server.base_url, "PAL_DEFAULT_MODEL": "fake",
           "PAL_DEFAULT_STRUCTURED_MODE": "prompt"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def test_two_methods_side_by_side_stream_and_show_both_transcripts(app_env, fake_server):
    dataset = load_dataset(DEMO)
    turns = len(fixed_schedule(dataset, f"{SAMPLE}_{TOPIC}")[0])
    with running_app(env=app_env) as url, browser_page(height=3000) as page:
        page.goto(f"{url}/simulate?user={UID}&method=vanilla-log&compare=vanilla")
        page.get_by_role("button", name="Start").click(timeout=45_000)
        page.wait_for_function(f"document.querySelectorAll(\"{CHAT}\").length >= {4 * turns}", timeout=120_000)
        page.wait_for_selector("text=Export Markdown", timeout=30_000)
        columns = page.locator("[data-testid='stColumn']").filter(has=page.locator(CHAT))
        assert columns.count() == 2
        for i in range(2):
            assert columns.nth(i).locator(CHAT).count() == 2 * turns
            first_reply = columns.nth(i).locator(CHAT).nth(1).locator("[data-testid='stMarkdownContainer']").first
            assert "assistant answers (RP) politely" in first_reply.inner_text()
        assert page.get_by_text("Feedback Response").count() >= 2  # act badges
        assert "run=run-1001-vanilla-log-" in page.evaluate("location.href")
    runs = [app_workspace().sims.load(run_id_for(make_spec(dataset, UID, SAMPLE, TOPIC, m))) for m in ("vanilla-log", "vanilla")]
    assert [r.status for r in runs] == ["finished", "finished"] and runs[0].pair_id == runs[1].pair_id
    streamed = [b for b in fake_server.requests if b.get("stream")]
    by_user = [b for b in streamed if "chat messages that" in b["messages"][0]["content"]]
    # every turn of both runs, the assistant's and the User-LLM's (plain text in fixed mode), came as a token stream
    assert len(streamed) - len(by_user) == 2 * turns and len(by_user) == 2 * turns
    assert all(u.content == f"assistant answers ({act_code(u.act.value)}) politely" for r in runs for u in r.utterances
               if u.side == "assistant")


def slow_llm(body: dict) -> tuple[int, dict, bytes]:
    import time

    time.sleep(0.25)
    return fake_llm(body)


def test_a_run_goes_on_with_the_page_closed_and_shows_finished_when_reopened(tmp_path, monkeypatch):
    import time

    from testkit.workspace import make_workspace

    dataset = load_dataset(DEMO)
    turns = len(fixed_schedule(dataset, f"{SAMPLE}_{TOPIC}")[0])
    run_id = run_id_for(make_spec(dataset, UID, SAMPLE, TOPIC, "vanilla-log"))
    server = FaultServer(default=slow_llm)
    with server.running():
        env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_DEFAULT_PROVIDER": "openai",
               "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "fake",
               "PAL_DEFAULT_STRUCTURED_MODE": "prompt"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        ws = make_workspace(tmp_path / "pal")
        with running_app(env=env) as url:
            with browser_page(height=3000) as page:
                page.goto(f"{url}/simulate?user={UID}&method=vanilla-log")
                page.get_by_role("button", name="Start").click(timeout=45_000)
                page.wait_for_selector(CHAT, timeout=60_000)  # the first utterance is on the page
            at_close = ws.sims.load(run_id)  # the browser is gone now
            assert at_close.status == "running" and len(at_close.utterances) < 2 * turns
            deadline = time.monotonic() + 120
            while ws.sims.load(run_id).status != "finished" and time.monotonic() < deadline:
                time.sleep(0.2)
            done = ws.sims.load(run_id)
            assert done.status == "finished" and len(done.utterances) == 2 * turns  # finished with no page open
            with browser_page(height=3000) as page:
                page.goto(f"{url}/simulate?run={run_id}")
                page.wait_for_function(f"document.querySelectorAll(\"{CHAT}\").length >= {2 * turns}",
                                       timeout=60_000)
                page.wait_for_selector("text=Export Markdown", timeout=30_000)
                assert page.locator(CHAT).count() == 2 * turns
