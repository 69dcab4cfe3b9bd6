"""One real FairEval of two real simulated runs on the default local model, Qwen2.5-Coder-0.5B (
each role's real path runs once on the model users get; paths that only need *a* model use SmolLM2 elsewhere).

User 1006 of the demo data (``data/demo``, the project's own synthetic users) is Chinese: the User-LLM opens as
the user, in Chinese; the rag-turn assistant streams its query summary, retrieves with it and replies in Chinese;
a memoryless assistant answers the same opening; the judge reads both dialogues in both orders (k = 1). One
exchange per run (fixed mode, stepped as the Simulate page steps) and the top-1 turn and log (rag-turn with k = 1)
keep it short.

Most of its time is prompt processing on a one-thread server, so the model's endpoint takes one call at a time:
two judge orders in flight share nothing, while one after the other the second reuses the first's prompt up to
the dialogues (the instructions, profile, situation and requirement: most of its ~1,900 tokens)."""

import re
import time

import pytest

from backends.local_models import describe_model, find_model
from evaluation.faireval import judge_pair
from palset.loader import load_dataset
from sim.persona_check import in_language, speaks_as_user
from sim.service import make_spec
from testkit.workspace import make_workspace
from tests.conftest import DEFAULT_MODEL, DEMO, local_model_env

pytestmark = [pytest.mark.slow(seconds=240), pytest.mark.local_model]
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_faireval_of_two_local_chinese_exchanges_on_the_default_model(local_servers, tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    # the hash embedder: retrieval runs, its quality is not the point (real embeddings: tests/backends, tests/cli)
    env = {"PAL_DEFAULT_TIMEOUT": "600", "PAL_EMBEDDER": "hash", "PAL_JUDGE_MAX_TOKENS": "320",
           **local_model_env(DEFAULT_MODEL)}
    served = find_model(DEFAULT_MODEL)
    assert served is not None
    one_at_a_time = {"limits": {f"local:{served.name}": {"concurrency": 1}}}
    ws = make_workspace(tmp_path, env=env, secrets=one_at_a_time, servers=local_servers)
    llm = ws.llm(session_id="real-faireval")
    ds = load_dataset(DEMO)
    user = ds.users["1006"]
    runs, sims = [], []
    for method in ("rag-turn", "vanilla"):
        builder = ws.open_builder(ds, "1006", method, llm=llm, method_config={"k": 1}) if method != "vanilla" else None
        if builder is not None:
            builder.run()
        spec = make_spec(ds, "1006", user.query[0].sample_id, "topic-1", method, mode="fixed")
        sim = ws.open_simulation(ds, spec, llm, builder=builder)
        queried: list[str] = []
        for _ in range(2):  # the opening and the assistant's first reply
            sim.step(on_query=queried.append)
        said = {u.side: u for u in sim.record.utterances}
        assert set(said) == {"user", "assistant"}
        assert speaks_as_user(said["user"].content, "zh", name=user.name).ok, said["user"].content
        assert in_language(said["assistant"].content, "zh"), said["assistant"].content
        if method == "rag-turn":  # the memory search streamed first, in Chinese, and is what it retrieved with
            assert queried[-1] == said["assistant"].retrieval_query, queried  # what the page shows last
            assert all(q.strip() for q in queried)
            assert CJK.search(said["assistant"].retrieval_query or "") and said["assistant"].trace["items"]
        else:
            assert not queried and said["assistant"].retrieval_query is None
        runs.append(sim.record)
        sims.append(sim)
    started = time.perf_counter()
    judgment = judge_pair(llm, sims[0].ctx, runs[0], runs[1], "requirement", k=1)
    elapsed = time.perf_counter() - started
    assert len(judgment.samples) == 2 and {s.order for s in judgment.samples} == {1, 2}
    assert judgment.texts["order1"].assistant_1 == judgment.texts["order2"].assistant_2
    assert judgment.judge_model == served.name  # model, size and quantisation
    assert {c["model"] for c in llm.store.calls("real-faireval", limit=1000)} == {served.name}
    assert judgment.prompt_name == "eval/faireval_mempal_requirement.zh"  # the authors' Chinese original
    assert describe_model(judgment.judge_model) == served.describe()
    assert judgment.decision in ("win", "tie", "lose", "invalid")
    valid = [s for s in judgment.samples if s.ok]
    assert valid, [s.error for s in judgment.samples]  # the 0.5B's verdict parses (bounded JSON, point 2)
    assert all(1 <= s.score_a <= 10 and 1 <= s.score_b <= 10 for s in valid)
    print(f"judge ({served.name}): {len(judgment.samples)} samples in {elapsed:.1f} s, decision {judgment.decision}")
