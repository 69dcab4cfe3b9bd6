"""FairEval statistics on hand-computed cases: the cluster bootstrap over users, every topic in the denominator,
FastChat's win_rate_adjusted, position consistency, score margin and position-decided judgments, and a topic judged
in both directions counted once."""

import math

import pytest

from evaluation.aggregate import aggregate_judgments, bootstrap_ci
from evaluation.faireval_stats import (
    POINTS,
    cluster_bootstrap,
    identical_orders,
    judgment_position,
    mirrored,
    one_per_topic,
    outcome_summary,
    position_summary,
)
from tests.evaluation.test_aggregate import judgment

WIN, LOSE, TIE_FLIP = [(1, 8, 5), (2, 8, 5)], [(1, 4, 6), (2, 4, 6)], [(1, 8, 5), (2, 5, 8)]
SLOT1_BIGGER = [(1, 9, 5), (2, 6, 7)]  # order 1: A (slot 1) by 4; order 2: B (slot 1) by 1 → A wins by position
INVALID = [(1, 8, 5)]  # no valid sample in order 2


def test_one_user_alone_gives_no_interval_however_many_topics_it_has():
    """Resampling users: with one user every replicate is that user's own mean, so the CI is the point."""
    assert cluster_bootstrap([[1.0, 0.0, 0.5, 0.5]]) == (0.5, 0.5)
    # resampling the judgments as if independent gives a wide interval for the same data
    lo, hi = bootstrap_ci([1.0, 0.0, 0.5, 0.5])
    assert hi - lo > 0.4


def test_two_users_hand_computed():
    """Clusters [1, 1] and [0]: a replicate draws (c1, c1) → 4/4 = 1, (c1, c2) or (c2, c1) → 2/3, (c2, c2) → 0;
    each end has probability ¼, so the 95% percentile interval is [0, 1]; the pooled point is 2/3."""
    assert cluster_bootstrap([[1.0, 1.0], [0.0]], n_boot=4000) == (0.0, 1.0)
    assert all(math.isnan(x) for x in cluster_bootstrap([[], []]))  # no value at all


def test_a_dominant_user_widens_the_interval():
    """User u0 with 10 wins, nine users with one loss each: the item bootstrap treats 19 independent topics, the
    cluster bootstrap knows 10 of them rise and fall together."""
    clusters = [[1.0] * 10] + [[0.0]] * 9
    c_lo, c_hi = cluster_bootstrap(clusters, seed=3)
    i_lo, i_hi = bootstrap_ci([v for c in clusters for v in c], seed=3)
    assert c_lo <= 10 / 19 <= c_hi
    assert (c_hi - c_lo) > 1.5 * (i_hi - i_lo)


def test_invalid_and_dropped_topics_are_in_the_denominator_and_ties_count_half():
    """2 wins, 1 tie, 1 loss, 1 invalid, 2 dropped: win_rate_adjusted (FastChat) = (2 + ½) / 4 = 0.625 over decided
    topics; of all 7 topics 2/7 won, 1/7 invalid, 2/7 dropped."""
    js = [judgment("u1", "t1", WIN), judgment("u1", "t2", WIN), judgment("u2", "t3", TIE_FLIP),
          judgment("u2", "t4", LOSE), judgment("u3", "t5", INVALID)]
    out = outcome_summary(js, dropped=2, n_boot=200)
    assert (out["win"], out["tie"], out["lose"], out["invalid"], out["dropped"]) == (2, 1, 1, 1, 2)
    assert out["n"] == 4 and out["topics"] == 7
    assert out["win_rate_adjusted"] == pytest.approx(0.625) == out["adjusted_win_rate"]
    assert out["win_share_all"] == pytest.approx(2 / 7) and out["invalid_share_all"] == pytest.approx(1 / 7)
    assert out["dropped_share_all"] == pytest.approx(2 / 7)
    assert sum(out[f"{d}_share_all"] for d in ("win", "tie", "lose", "invalid", "dropped")) == pytest.approx(1)
    assert out["users"] == 3
    lo, hi = out["adjusted_win_rate_ci"]
    assert lo <= 0.625 <= hi


def test_position_figures_of_single_judgments():
    consistent = judgment_position(judgment("u", "t", WIN))
    assert consistent == {"position_consistent": True, "score_margin": 3.0, "position_decided": False}
    by_slot = judgment("u", "t", SLOT1_BIGGER)
    assert (by_slot.decision, by_slot.order1_winner, by_slot.order2_winner) == ("win", "A", "B")
    assert judgment_position(by_slot) == {"position_consistent": False, "score_margin": 1.5, "position_decided": True}
    flip_tie = judgment_position(judgment("u", "t", TIE_FLIP))
    assert flip_tie == {"position_consistent": False, "score_margin": 0.0, "position_decided": False}  # a tie is not decided
    assert judgment_position(judgment("u", "t", INVALID)) == {"position_consistent": None, "score_margin": None,
                                                             "position_decided": False}


def test_headline_position_shares_hand_computed():
    """Valid: WIN, WIN, SLOT1_BIGGER, TIE_FLIP, LOSE → consistent 3 of 5; decided: WIN, WIN, SLOT1_BIGGER, LOSE →
    position-decided 1 of 4; margins 3, 3, 1.5, 0, 2 → mean 1.9; decided margins 3, 3, 1.5, 2 → median 2.5."""
    js = [judgment("u1", "t1", WIN), judgment("u1", "t2", WIN), judgment("u2", "t3", SLOT1_BIGGER),
          judgment("u2", "t4", TIE_FLIP), judgment("u3", "t5", LOSE), judgment("u3", "t6", INVALID)]
    out = position_summary(js, n_boot=200)
    assert out["position_consistency"] == pytest.approx(3 / 5) and out["position_consistency_n"] == 5
    assert out["position_decided_share"] == pytest.approx(1 / 4)
    assert (out["position_decided"], out["decided"]) == (1, 4)
    assert out["mean_margin"] == pytest.approx(1.9) and out["median_margin_decided"] == pytest.approx(2.5)
    assert out["thin_share"] == 0.0


def test_orders_whose_samples_cannot_differ_are_counted():
    from tests.evaluation.test_faireval import sample

    same = [sample(1, i, 8, 6) for i in range(3)] + [sample(2, 0, 7, 7), sample(2, 1, 6, 7), sample(2, 2)]
    assert identical_orders(same) == (1, 2)
    assert identical_orders([sample(1, 0, 8, 6), sample(2, 0, 8, 6)]) == (0, 0)  # k = 1: nothing to compare


def test_a_topic_judged_in_both_directions_is_one_observation_from_the_boards_side():
    ab = judgment("u1", "t1", WIN).model_copy(update={"created_at": 1.0})
    ba = judgment("u1", "t1", LOSE).model_copy(update={"method_a": "B", "method_b": "A", "created_at": 2.0})
    seen = mirrored(ba)
    assert (seen.method_a, seen.method_b, seen.decision) == ("A", "B", "win")  # B lost as A → A won
    assert (seen.mean_a, seen.mean_b) == (ba.mean_b, ba.mean_a)
    assert [s.order for s in seen.samples] == [1, 2] and seen.samples[0].score_a == ba.samples[1].score_b
    assert seen.texts["order1"] == ba.texts["order2"]
    (only,) = one_per_topic([ab, ba], "A", "B")
    assert only.created_at == 2.0 and only.method_a == "A"
    other = judgment("u1", "t2", WIN)
    assert len(one_per_topic([ab, ba, other], "A", "B")) == 2
    assert one_per_topic([ab], "A", "C") == []


def test_aggregate_rows_carry_the_shares_the_position_figures_and_the_cluster_ci():
    js = [judgment("u1", "t1", WIN), judgment("u1", "t2", SLOT1_BIGGER), judgment("u2", "t3", LOSE)]
    (row,) = aggregate_judgments(js, n_boot=200)
    assert row["win_rate_adjusted"] == pytest.approx(2 / 3)
    assert row["position_decided_share"] == pytest.approx(1 / 3)
    assert row["ci_method"].startswith("cluster bootstrap over users")
    assert "faireval_summary=2" in row["metric_versions"]
    assert POINTS == {"win": 1.0, "tie": 0.5, "lose": 0.0}


def test_a_board_of_few_users_says_its_interval_understates_the_uncertainty():
    few = outcome_summary([judgment(f"u{i}", "t", WIN) for i in range(3)], n_boot=50)
    many = outcome_summary([judgment(f"u{i}", "t", WIN) for i in range(12)], n_boot=50)
    assert "only 3 user(s)" in few["ci_note"] and many["ci_note"] == ""
