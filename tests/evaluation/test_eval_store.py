"""The evaluation store's cheap existence check (the tour asks it on every rerun of the home page)."""

from __future__ import annotations

from evaluation.tasks import TaskResult
from testkit.workspace import make_workspace


def test_any_result_says_whether_a_dataset_has_single_turn_results(tmp_path):
    store = make_workspace(tmp_path).evals
    assert not store.any_result("demo")
    store.save_result(TaskResult(result_key="k1", dataset="demo", user_id="1000", sample_id="1000_sample7",
                                 topic_key="topic-1", method="gold", task="restatement", model="m",
                                 prompt_name="eval/requirement_restatement", prompt_version="1", ok=True))
    assert store.any_result("demo") and not store.any_result("other")
    assert [r.result_key for r in store.results("demo")] == ["k1"]
