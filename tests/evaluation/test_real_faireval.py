"""One real FairEval of two real simulated runs, every role (assistant, user simulator, judge) on one local model:
SmolLM2-135M by default (``tests.conftest.local_model_env``; it also runs on Qwen2.5-Coder-0.5B).

Two exchanges of free mode and short answers (max_tokens capped by environment, as a user would) keep it to
about a minute and a half on one CPU core; the judge reads both whole dialogues in both orders.
The 135M model is no judge — this proves the whole path, not the verdict."""

import time

import pytest

from backends.local_models import describe_model, find_model
from evaluation.faireval import judge_pair
from palset.loader import load_dataset
from sim.service import make_spec
from testkit.workspace import make_workspace
from tests.conftest import DEMO, local_model_env

pytestmark = [pytest.mark.slow(seconds=120), pytest.mark.local_model]


def test_faireval_of_two_local_runs(local_servers, tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    # the user simulator's JSON reply and the judge's verdict each fit their limit (a reply cut off is asked again)
    env = {"PAL_DEFAULT_MAX_TOKENS": "48", "PAL_USER_SIMULATOR_MAX_TOKENS": "128", "PAL_JUDGE_MAX_TOKENS": "320",
           "PAL_DEFAULT_TIMEOUT": "600", **local_model_env()}
    ws = make_workspace(tmp_path, env=env, servers=local_servers)
    llm = ws.llm(session_id="real-faireval")
    ds = load_dataset(DEMO)
    runs = []
    for method in ("vanilla", "vanilla-log"):
        spec = make_spec(ds, "1002", "1002_sample7", "topic-1", method, mode="free", max_turns=2)
        sim = ws.open_simulation(ds, spec, llm)
        record = sim.run()
        assert record.status == "finished", record.error
        sides = [u.side for u in record.utterances]
        assert sides and sides.count("user") == sides.count("assistant") <= 2
        runs.append(record)
    ctx = sim.ctx
    started = time.perf_counter()
    judgment = judge_pair(llm, ctx, runs[0], runs[1], "requirement", k=1)
    elapsed = time.perf_counter() - started
    assert len(judgment.samples) == 2 and {s.order for s in judgment.samples} == {1, 2}
    assert judgment.texts["order1"].assistant_1 == judgment.texts["order2"].assistant_2
    served = find_model(env["PAL_DEFAULT_MODEL"])
    assert served is not None and judgment.judge_model == served.name  # model, size and quantisation, e.g. …-Q4_1
    assert {c["model"] for c in llm.store.calls("real-faireval", limit=1000)} == {served.name}
    assert judgment.prompt_name == "eval/faireval_requirement" and describe_model(judgment.judge_model) == served.describe()
    assert judgment.decision in ("win", "tie", "lose", "invalid")
    valid = [s for s in judgment.samples if s.ok]
    assert all(1 <= s.score_a <= 10 and 1 <= s.score_b <= 10 for s in valid)
    print(f"judge ({served.name}): {len(judgment.samples)} samples in {elapsed:.1f} s, decision {judgment.decision}")
