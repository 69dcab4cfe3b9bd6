"""The Evaluate page's pure builders: every export carries its metric versions; dropped topics are exported."""

from __future__ import annotations

import json

from evaluation.aggregate import aggregate_judgments, leaderboard
from evaluation.service import DroppedTopic
from evaluation.takeaway_words import figure_label
from evaluation.tasks import TaskResult
from evaluation.versions import METRIC_VERSIONS
from tests.evaluation.test_aggregate import LOSE, WIN, judgment
from ui.evaluate.data import (
    aggregates_frame,
    dropped_frame,
    judgments_frame,
    leaderboard_frame,
    to_jsonl,
    with_versions,
)

DROPPED = [DroppedTopic("u1", "s9", "topic-1", "A", "B", "finished", "failed", "no usable utterance after 3 tries")]


def test_faireval_exports_carry_metric_versions_and_dropped_topics():
    js = [judgment("u1", "t1", WIN), judgment("u1", "t2", LOSE)]
    rows = aggregate_judgments(js, n_boot=50, dropped=DROPPED)
    agg = aggregates_frame(rows)
    assert agg.loc[0, "dropped"] == 1 and agg.loc[0, "invalid"] == 0
    assert agg.loc[0, "metric_versions"] == "faireval_decision=2;faireval_summary=2;length_bias=1"
    assert {"longer_win_rate", "length_diff_win", "length_diff_lose"} <= set(agg.columns)
    assert set(judgments_frame(js)["metric_versions"]) == {"faireval_decision=2;faireval_summary=2"}
    assert {"position_consistent", "score_margin", "position_decided"} <= set(judgments_frame(js).columns)
    assert {"position_consistency", "position_decided_share", "win_share_all", "dropped_share_all",
            "ci_method"} <= set(agg.columns)
    lines = [json.loads(x) for x in to_jsonl(js, rows, DROPPED).splitlines()]
    assert lines[0] == {"type": "metric_versions", **METRIC_VERSIONS}
    assert [x["type"] for x in lines[1:]] == ["judgment", "judgment", "aggregate", "dropped"]
    assert lines[-1]["status_b"] == "failed" and "B: failed (no usable utterance" in lines[-1]["reason"]
    frame = dropped_frame(DROPPED)
    assert list(frame.columns) == ["user", "sample", "topic", "A", "B", "error"] and frame.loc[0, "B"] == "failed"


def test_leaderboard_frame_counts_judge_failures_and_its_export_carries_versions():
    def res(task, key, **kw):
        return TaskResult(result_key=key, dataset="d", user_id="u", sample_id="s", topic_key=key, method="A",
                          task=task, model="m", prompt_name="p", prompt_version="1", ok=True, **kw)
    rows = leaderboard([res("restatement", "t1", bleu={1: 0.5, 2: 0.2, 3: 0.1, 4: 0.1}, g_score=2.0, g_ok=True),
                        res("restatement", "t2", bleu={1: 0.5, 2: 0.2, 3: 0.1, 4: 0.1}, g_ok=False)], n_boot=50)
    frame = leaderboard_frame(rows)
    assert frame.loc[0, "G judge failed"] == 1 and frame.loc[0, "topics"] == 2
    assert frame.loc[0, figure_label("g_score")].startswith("100.0")
    assert list(frame.columns)[:3] == ["method", figure_label("g_score"), figure_label("s_score")]  # metrics first
    exported = with_versions(frame, "bleu", "g_score", "s_score")
    assert exported.loc[0, "metric_versions"] == "bleu=1;g_score=2;s_score=2"
