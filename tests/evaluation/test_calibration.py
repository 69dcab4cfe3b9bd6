"""FairEval's human-in-the-loop calibration: BPDE on hand-made verdicts, ranking, the blinded review batch of
the most uncertain topics, and win/tie/lose as judged and as calibrated by people."""

from __future__ import annotations

import math

import pytest

from evaluation.calibration import bpde, calibrate, plan_calibration, rank_topics, sampling_note, top_share, verdicts
from evaluation.human_agreement import calibration_votes
from review.batches import shown_order
from testkit.workspace import make_workspace
from tests.evaluation.test_aggregate import judgment

UNANIMOUS = [(1, 8, 5)] * 3 + [(2, 8, 5)] * 3            # A A A A A A
SPLIT = [(1, 8, 5)] * 3 + [(2, 5, 8)] * 3                # A A A B B B (pure position bias)
THREE_WAY = [(1, 8, 5), (1, 8, 5), (1, 6, 6), (2, 6, 6), (2, 5, 8), (2, 5, 8)]  # A A tie tie B B
MOSTLY_A = [(1, 8, 5)] * 3 + [(2, 8, 5), (2, 7, 7), (2, 5, 9)]  # A A A A tie B


def test_bpde_is_the_entropy_of_the_2k_verdicts():
    assert verdicts(judgment("u", "t", THREE_WAY)) == ["A", "A", "tie", "tie", "B", "B"]
    assert bpde(judgment("u", "t", UNANIMOUS)) == 0.0
    assert bpde(judgment("u", "t", SPLIT)) == pytest.approx(1.0)
    assert bpde(judgment("u", "t", THREE_WAY)) == pytest.approx(math.log2(3))
    expected = -(4 / 6 * math.log2(4 / 6) + 2 * (1 / 6) * math.log2(1 / 6))
    assert bpde(judgment("u", "t", MOSTLY_A)) == pytest.approx(expected) == pytest.approx(1.2516, abs=1e-4)
    assert bpde(judgment("u", "t", [(1, 8, 5)])) is None  # no valid sample in order 2: invalid


def test_topics_rank_most_uncertain_first_with_invalid_on_top():
    js = [judgment("u", "t1", UNANIMOUS), judgment("u", "t2", SPLIT), judgment("u", "t3", THREE_WAY),
          judgment("u", "t4", [(1, 8, 5)]), judgment("u", "t1", SPLIT, aspect="preference"),
          judgment("u", "t5", UNANIMOUS)]
    ranked = rank_topics(js)
    assert [t.topic_key for t in ranked] == ["t4", "t3", "t1", "t2", "t5"]  # t1: its preference entropy is 1.0
    assert ranked[2].entropy == {"requirement": 0.0, "preference": pytest.approx(1.0)}
    assert top_share(5) == 1 and top_share(10) == 2 and top_share(11) == 3 and top_share(0) == 0


def test_equally_uncertain_topics_are_ordered_by_a_seeded_draw_not_by_user():
    """At temperature 0 most topics tie (BPDE 0); sorting ties by user sent the lowest user ids to
    review. Now a seed decides, the same in every process, and different seeds give different orders."""
    js = [judgment(u, f"t{k}", UNANIMOUS) for u in ("1000", "1001", "1002", "1003") for k in range(5)]
    orders = {tuple(t.key for t in rank_topics(js, seed=s)) for s in range(6)}
    assert len(orders) > 1
    first = rank_topics(js, seed=0)
    assert first == rank_topics(list(reversed(js)), seed=0)  # not the judgments' order either
    assert [t.user_id for t in first[:5]] != ["1000"] * 5
    assert sampling_note(js) is None and "temperature 0" in sampling_note(
        [j.model_copy(update={"judge_temperature": 0.0}) for j in js])


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return make_workspace(tmp_path / "pal").reviews


def test_the_most_uncertain_topics_become_a_blinded_pairwise_batch_and_calibrate_the_judge(store):
    js = [judgment("u", "t1", UNANIMOUS), judgment("u", "t2", SPLIT), judgment("u", "t3", THREE_WAY),
          judgment("u", "t4", MOSTLY_A), judgment("u", "t5", UNANIMOUS)]
    assert [j.decision for j in js] == ["win", "tie", "tie", "win", "win"]
    plan = plan_calibration("", "d", rank_topics(js), 3, seed=5, overlap=2, annotators=["ann1", "ann2", "ann3"])
    keys = sorted(k for k, _ in plan.items)
    assert keys == ["u/s/t2", "u/s/t3", "u/s/t4"]  # t3 (1.585) > t4 (1.25) > t2 (1.0)
    assert plan.task == "pairwise" and all("swap" in p for _, p in plan.items)
    assert plan.data["calibration"]["methods"] == ["A", "B"] and plan.data["calibration"]["version"] == "2"
    assert plan.data["calibration"]["uncertainty"]["u/s/t3"]["score"] == pytest.approx(math.log2(3))
    batch = store.create_batch(plan, "boss")
    people = {"t2": "A", "t3": "B", "t4": "A"}  # B wins t3 for people; t2's tie becomes A's win; t4 stays a win
    for item in store.items(batch):
        p = item["payload"]
        favoured = people[p["topic_key"]]
        letter = "A" if shown_order(p)[0] == favoured else "B"
        for who in store.assignments(batch)[item["item_no"]]:
            store.answer(batch, item["item_no"], who, "requirement", letter)
    votes = calibration_votes(store, "d", ("A", "B"))
    assert len(votes) == 3 and all(len(v.votes) == 2 for v in votes)
    cal = calibrate(js, votes, "requirement")
    assert (cal.judged["win"], cal.judged["tie"], cal.judged["lose"]) == (3, 2, 0)
    assert (cal.calibrated["win"], cal.calibrated["tie"], cal.calibrated["lose"]) == (4, 0, 1)
    assert cal.decided_by_people == 3 and cal.overturned == 2 and cal.overturn_rate == pytest.approx(2 / 3)
    assert {r["topic"]: (r["judge"], r["people"]) for r in cal.rows} == {
        "t2": ("tie", "win"), "t3": ("tie", "lose"), "t4": ("win", "win")}
    assert calibrate(js, votes, "preference").decided_by_people == 0  # not answered for that aspect


def test_a_split_vote_keeps_the_judges_decision(store):
    from evaluation.human_agreement import HumanVote

    js = [judgment("u", "t1", SPLIT)]
    cal = calibrate(js, [HumanVote("u", "s", "t1", "requirement", ("A", "B"), {"a": "A", "b": "B"})], "requirement")
    assert cal.splits == 1 and cal.decided_by_people == 0 and cal.calibrated["tie"] == 1


def test_calibration_needs_judged_topics_of_one_pair():
    with pytest.raises(ValueError, match="no judged topics"):
        plan_calibration("", "d", [], 3, 1, 1, ["a"])
