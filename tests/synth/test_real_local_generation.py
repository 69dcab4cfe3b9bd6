"""One real generation with a local model (SmolLM2-135M by default, ``tests.conftest.local_model_env``; it also runs
on Qwen2.5-Coder-0.5B): a one-month English user, every step
through the synthesizer role, on a server whose slots give each request only 2,048 tokens (ctx 4096 /
parallel 2). The user is assembled into a folder that passes ``pal validate`` and opens in the Users page, and
no request ever exceeded the slot's window (by the server's own prompt count + the max_tokens sent). And the
synthesizer role once on the default model (a Chinese profile).

Counts are reduced to keep the test short on one CPU core (one situation with one topic and 5–6 logs: two
situations took 209–421 s in make test, the 135M model re-asked on each; one took 131 s alone); the steps, prompts, schemas and rules are the product's own. The small window is tight for them:
the preference step alone asks for up to 1,600 tokens of answer, so requests come within a few tokens of it."""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from cli.main import main
from palset.loader import load_dataset
from synth.config import SynthConfig
from synth.lang import CHARS_PER_TOKEN
from synth.pipeline import Pipeline
from synth.registry import get_step
from testkit.workspace import make_workspace
from tests.conftest import DEFAULT_MODEL, DEMO, local_model_env
from tests.pages.apptest import open_page

pytestmark = [pytest.mark.slow(seconds=210), pytest.mark.local_model]

STEPS = {"synth/profile", "synth/timeline", "synth/requirement_types", "synth/preferences", "synth/situations",
         "synth/experience", "synth/requirement_framework", "synth/candidate_solutions", "synth/solution_preference",
         "synth/logs", "synth/dialogues"}


def test_a_one_month_english_user_in_a_small_window(local_servers, tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    out = tmp_path / "generated"
    ws = make_workspace(tmp_path / "pal", secrets={"local": {"ctx": 4096, "parallel": 2}},
                        env={"PAL_DEFAULT_TIMEOUT": "600", **local_model_env()}, servers=local_servers)
    llm = ws.llm(session_id="real-synth")
    config = SynthConfig(lang="en", months=1, seed=1, description="a 38-year-old bus driver in Manchester with two children",
                         situations_min=1, situations_max=1, max_topics=1, min_logs=5, max_logs=6, retries=3,
                         tolerable_retries=0)
    started = time.perf_counter()
    pipe = Pipeline.create(config, str(out), ws.synth, llm=llm)
    info = pipe.run()
    reruns = 0
    while info.status == "failed" and reruns < 3 and pipe.pending()[0] != "assemble":
        reruns += 1  # what a person does on the Generate page: re-run the failed step (it samples afresh)
        print(f"re-running {pipe.pending()[0]} after: {info.error}")
        info = pipe.rerun_from(pipe.pending()[0])
    seconds = time.perf_counter() - started
    cost = pipe.cost()
    budget = llm.budget("synthesizer")
    calls = llm.store.calls("real-synth", limit=5000)
    sent = [c for c in calls if not c["cache_hit"] and c["tokens_in"]]
    print(f"real generation: {info.status} in {seconds:.0f}s, {cost.calls} calls, {cost.tokens_in} tokens in, "
          f"{cost.tokens_out} out; largest request {max(c['tokens_in'] + c['max_tokens'] for c in sent)} of "
          f"{budget.window} tokens, {len([c for c in sent if c['fit_note']])} fitted")
    print("\n".join(pipe.report().lines()))
    assert info.status == "finished", info.error
    assert cost.calls >= 13 and cost.tokens_out > 0
    assert {c["prompt_name"] for c in calls} >= STEPS

    # the window: every request fitted to the slot, none refused by the endpoint for its context
    assert budget.window == 2048
    for c in sent:
        assert c["tokens_in"] + c["max_tokens"] <= budget.window, c
    assert not [c for c in calls if c["error"] and "context" in c["error"].lower()]
    assert len(pipe.record("situations").output["situations"]) == 1

    # the release: valid, and it opens in the Users page
    assert main(["validate", str(out), "--quiet"]) == 0
    user = load_dataset(out).users[info.uid]
    assert user.sessions and all(s.logs and s.turns for s in user.sessions)
    monkeypatch.setenv("PAL_DATASETS", f"generated={out}")
    at = open_page("users", timeout=120, dataset="generated", user=info.uid)
    assert not any("No user with id" in w.value for w in at.warning)
    assert [t.value for t in at.title] == [user.name]


@pytest.mark.slow(seconds=30)
def test_the_synthesizer_writes_a_chinese_profile_on_the_default_model(local_servers, tmp_path, monkeypatch):
    """The synthesizer role on the default model: the first step of a Chinese user, its profile,
    passes the step's schema and rules and is written in Chinese."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    ws = make_workspace(tmp_path / "pal", env={"PAL_DEFAULT_TIMEOUT": "600", **local_model_env(DEFAULT_MODEL)},
                        servers=local_servers)
    llm = ws.llm(session_id="default-synth")
    config = SynthConfig(lang="zh", months=1, seed=3, description="成都一位三十五岁的公交车司机，有两个孩子",
                         situations_min=1, situations_max=1, max_topics=1, min_logs=3, max_logs=4, retries=3)
    pipe = Pipeline.create(config, str(tmp_path / "generated"), ws.synth, llm=llm)
    info = pipe.run(until="profile")
    assert pipe.record("profile") is not None, info.error
    profile = pipe.output("profile").model_dump(by_alias=True)
    assert not get_step("profile").check(profile, {}, config)
    assert re.search(r"[\u4e00-\u9fff]", json.dumps(profile, ensure_ascii=False)), profile
    assert {c["model"] for c in llm.store.calls("default-synth", limit=100)} == {DEFAULT_MODEL}
    # the characters per token that budgets are sized from hold on the served model's tokenizer (demo users' timelines)
    server = next(s for s in local_servers.running() if "qwen2.5-coder-0.5b" in s.model_path.name.lower())
    timelines = json.loads((DEMO / "timeline" / "timeline.json").read_text(encoding="utf-8"))
    for uid, lang in (("1000", "en"), ("1006", "zh")):
        text = " ".join(v for v in timelines[uid].values() if isinstance(v, str))
        assert len(text) / served_tokens(server.base_url.removesuffix("/v1"), text) >= CHARS_PER_TOKEN[lang], lang


def served_tokens(root: str, text: str) -> int:
    """Tokens of ``text`` by the llama.cpp server's own tokenizer."""
    req = urllib.request.Request(f"{root}/tokenize", data=json.dumps({"content": text}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return len(json.load(r)["tokens"])
