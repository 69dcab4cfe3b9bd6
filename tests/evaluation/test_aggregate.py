"""Aggregates: counts, adjusted win rate, seeded bootstrap CIs, per-user breakdown, flip and slot-1 rates."""

import pytest

from evaluation.aggregate import aggregate_judgments, bootstrap_ci, leaderboard, outcome_counts
from evaluation.faireval import JudgeSample, Judgment, OrderTexts, apply_decision
from evaluation.tasks import TaskResult


def judgment(user: str, topic: str, pairs: list[tuple[int, int, int]], aspect="requirement") -> Judgment:
    """A judgment from (order, score A, score B) samples."""
    samples = [JudgeSample(order=o, index=i, ok=True, score_a=a, score_b=b, slot1=a if o == 1 else b,
                           slot2=b if o == 1 else a) for i, (o, a, b) in enumerate(pairs)]
    texts = {"order1": OrderTexts(assistant_1="a", assistant_2="b"), "order2": OrderTexts(assistant_1="b", assistant_2="a")}
    j = Judgment(judgment_key=f"{user}{topic}{aspect}", dataset="d", user_id=user, sample_id="s", topic_key=topic,
                 aspect=aspect, method_a="A", method_b="B", run_a="ra", run_b="rb", k=1, judge_model="m",
                 prompt_name="p", prompt_version="1", texts=texts, samples=samples)
    return apply_decision(j, 0.0)


WIN, LOSE = [(1, 8, 5), (2, 8, 5)], [(1, 4, 6), (2, 4, 6)]
TIE_FLIP, SMALL = [(1, 8, 5), (2, 5, 8)], [(1, 7, 6), (2, 7, 6)]


@pytest.fixture
def judgments():
    return [judgment("u1", "t1", WIN), judgment("u1", "t2", WIN), judgment("u1", "t3", TIE_FLIP),
            judgment("u2", "t1", LOSE), judgment("u2", "t2", SMALL)]


def test_counts_and_adjusted_win_rate(judgments):
    (row,) = aggregate_judgments(judgments, n_boot=200)
    assert (row["win"], row["tie"], row["lose"], row["n"]) == (3, 1, 1, 5)
    assert row["win_rate"] == 0.6 and row["adjusted_win_rate"] == pytest.approx(3.5 / 5)
    assert row["per_user"]["u1"]["win"] == 2 and row["per_user"]["u1"]["tie"] == 1
    assert row["per_user"]["u2"]["adjusted_win_rate"] == 0.5
    assert row["flip_rate"] == pytest.approx(1 / 5)
    assert row["slot1_win_rate"] == pytest.approx(6 / 10)  # order-1 wins of A + order-2 wins of B + flips' slot-1
    assert outcome_counts(["win", "invalid"])["n"] == 1


def test_threshold_is_applied_when_aggregating(judgments):
    (row,) = aggregate_judgments(judgments, threshold=1.0, n_boot=200)
    assert (row["win"], row["tie"], row["lose"]) == (2, 2, 1)


def test_aspects_are_separate_groups(judgments):
    rows = aggregate_judgments([*judgments, judgment("u1", "t1", LOSE, aspect="preference")], n_boot=100)
    assert [(r["aspect"], r["n"]) for r in rows] == [("preference", 1), ("requirement", 5)]


def test_bootstrap_ci_contains_the_estimate_and_is_reproducible(judgments):
    (row,) = aggregate_judgments(judgments, seed=7)
    lo, hi = row["adjusted_win_rate_ci"]
    assert lo <= row["adjusted_win_rate"] <= hi and 0 <= lo < hi <= 1
    (again,) = aggregate_judgments(judgments, seed=7)
    assert again["adjusted_win_rate_ci"] == [lo, hi]
    values = [0.11, 0.93, 0.42, 0.57, 0.08, 0.71, 0.36, 0.99, 0.24]
    assert bootstrap_ci(values, seed=1, n_boot=300) == bootstrap_ci(values, seed=1, n_boot=300)
    assert bootstrap_ci(values, seed=1, n_boot=300) != bootstrap_ci(values, seed=2, n_boot=300)
    assert bootstrap_ci([0.5] * 4) == (0.5, 0.5)


def test_leaderboard_scales_and_cis():
    def res(task, **kw):
        return TaskResult(result_key=f"{task}{len(kw)}{kw}", dataset="d", user_id="u", sample_id="s", topic_key="t",
                          method="A", task=task, model="m", prompt_name="p", prompt_version="1", ok=True, **kw)
    results = [res("restatement", bleu={1: 0.5, 2: 0.2, 3: 0.1, 4: 0.1}, g_score=2.0),
               res("restatement", bleu={1: 0.3, 2: 0.2, 3: 0.1, 4: 0.0}, g_score=1.0),
               res("selection", s_score=2), res("selection", s_score=-1)]
    (row,) = leaderboard(results, n_boot=300)
    assert row["restatement_bleu1"]["value"] == pytest.approx(40.0)
    assert row["g_score"]["value"] == pytest.approx(75.0) and row["s_score"]["value"] == pytest.approx(25.0)
    lo, hi = row["g_score"]["ci"]
    assert lo <= 75.0 <= hi and 50.0 <= lo and hi <= 100.0


def test_g_score_judge_failures_leave_the_mean_and_have_their_own_column():
    """Scores 2, 1 and a failed judge call → 75 (not 50); a failed prediction still scores 0."""
    def res(key, **kw):
        return TaskResult(result_key=key, dataset="d", user_id="u", sample_id="s", topic_key=key, method="A",
                          task="restatement", model="m", prompt_name="p", prompt_version="1", **kw)
    results = [res("t1", ok=True, g_score=2.0, g_ok=True), res("t2", ok=True, g_score=1.0, g_ok=True),
               res("t3", ok=True, g_score=None, g_ok=False),
               res("t4", ok=True, g_score=0.0, g_ok=False)]  # stored before the fix: judge failure scored 0
    (row,) = leaderboard(results, n_boot=100)
    assert row["g_score"]["value"] == pytest.approx(75.0) and row["g_score"]["n"] == 2
    assert row["g_judge_failed"] == 2 and row["restatement_invalid"] == 0
    (row,) = leaderboard([*results, res("t5", ok=False, g_score=0.0, g_ok=None)], n_boot=100)
    assert row["g_score"]["value"] == pytest.approx(50.0) and row["restatement_invalid"] == 1
    assert "g_score=2" in row["metric_versions"] and "bleu=1" in row["metric_versions"]


def test_length_bias_win_rate_of_the_longer_dialogue_and_difference_per_verdict():
    def long_short(user, topic, pairs, a_words, b_words):
        j = judgment(user, topic, pairs)
        texts = {"order1": OrderTexts(assistant_1=f'- "user": hi\n- "assistant": {a_words}',
                                      assistant_2=f'- "user": hi\n- "assistant": {b_words}'),
                 "order2": OrderTexts(assistant_1=f'- "assistant": {b_words}', assistant_2=f'- "assistant": {a_words}')}
        return j.model_copy(update={"texts": texts})

    ten, two = " ".join(["word"] * 10), "word word"
    js = [long_short("u", "t1", WIN, ten, two),     # longer A wins
          long_short("u", "t2", LOSE, ten, two),    # longer A loses
          long_short("u", "t3", WIN, ten, two),     # longer A wins
          long_short("u", "t4", TIE_FLIP, two, ten)]  # tie
    (row,) = aggregate_judgments(js, n_boot=50)
    lb = row["length_bias"]
    assert lb["longer_win_rate"] == pytest.approx(2 / 3) and lb["longer_decided"] == 3
    assert lb["length_diff"] == {"win": 8.0, "tie": -8.0, "lose": 8.0}
    assert "length_bias=1" in row["metric_versions"]


def test_length_counts_tokens_the_same_way_in_chinese():
    from evaluation.bias import assistant_tokens

    assert assistant_tokens('- "user": 你好\n- "assistant": 我建议你早点睡觉') == 8
    assert assistant_tokens('- "user": hello there\n- "assistant": go to bed') == 3
