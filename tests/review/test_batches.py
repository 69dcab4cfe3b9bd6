"""Seeded sampling, overlap, access checks in the store, undo/resume, and 8 processes writing answers at once."""

import multiprocessing as mp
from collections import Counter

import pytest

from review.batches import assign, pairwise_candidates, plan_batch, winner
from tests.review.conftest import make_batch, memory_items


def test_sampling_is_reproducible_from_the_seed():
    cands = memory_items(200)
    a = plan_batch("x", "memory", "d", cands, 30, 42, 1, ["u"])
    b = plan_batch("x", "memory", "d", list(reversed(cands)), 30, 42, 1, ["u"])
    c = plan_batch("x", "memory", "d", cands, 30, 43, 1, ["u"])
    assert [k for k, _ in a.items] == [k for k, _ in b.items] != [k for k, _ in c.items]
    assert len({k for k, _ in a.items}) == 30


def test_pairwise_order_is_random_per_item_and_recorded():
    runs = [{"run_id": f"r{m}{i}", "status": "finished", "method": m, "user_id": "u", "sample_id": f"s{i}",
             "topic_key": "topic-1", "updated_at": 1.0} for i in range(40) for m in ("x", "y")]
    cands = pairwise_candidates(runs, "x", "y")
    assert len(cands) == 40
    plan = plan_batch("p", "pairwise", "d", cands, 40, 1, 1, ["u"])
    swaps = [p["swap"] for _, p in plan.items]
    assert 0 < sum(swaps) < 40
    assert swaps == [p["swap"] for _, p in plan_batch("p", "pairwise", "d", cands, 40, 1, 1, ["u"]).items]
    payload = plan.items[swaps.index(True)][1]
    assert winner(payload, "A") == "y" and winner(payload, "B") == "x" and winner(payload, "tie") == "tie"


@pytest.mark.parametrize(("people", "overlap"), [(3, 2), (5, 3), (4, 4), (2, 1)])
def test_each_item_goes_to_exactly_overlap_distinct_annotators(store, people, overlap):
    names = [f"a{i}" for i in range(people)]
    batch = make_batch(store, n=17, annotators=names, overlap=overlap)
    assigned = store.assignments(batch)
    assert len(assigned) == 17
    assert all(len(set(p)) == len(p) == overlap for p in assigned.values())
    load = Counter(p for ps in assigned.values() for p in ps)
    assert max(load.values()) - min(load.values()) <= 1  # round-robin spreads the work


def test_overlap_larger_than_the_team_is_refused():
    with pytest.raises(ValueError):
        assign(3, ["a", "b"], 3)


def test_answers_only_for_own_items_undo_and_resume(store):
    batch = make_batch(store, n=6, annotators=("a", "b", "c"), overlap=1)
    mine = store.assigned(batch, "a")
    other = store.assigned(batch, "b")[0]
    with pytest.raises(PermissionError):
        store.answer(batch, other, "a", "verdict", "correct")
    assert store.first_unanswered(batch, "memory", "a") == mine[0]
    store.answer(batch, mine[0], "a", "verdict", "correct")
    assert store.progress(batch, "memory", "a") == (1, len(mine))
    assert store.first_unanswered(batch, "memory", "a") == mine[1]
    assert store.undo_last(batch, "a")["item_no"] == mine[0]
    assert store.progress(batch, "memory", "a") == (0, len(mine))
    assert store.undo_last(batch, "a") is None


def _annotate(path: str, batch: str, who: str) -> None:
    from pathlib import Path

    from testkit.workspace import make_workspace

    s = make_workspace(Path(path).parent).reviews
    for no in s.assigned(batch, who):
        s.answer(batch, no, who, "verdict", "correct")


@pytest.mark.slow(seconds=20)
def test_eight_annotators_in_parallel_processes_store_exactly_4000_answers(store):
    names = [f"ann{i}" for i in range(8)]
    batch = make_batch(store, n=500, annotators=names, overlap=8, candidates=memory_items(500))
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_annotate, args=(str(store.db.path), batch, n)) for n in names]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0] * 8
    assert store.count_answers(batch) == 4000
    assert all(store.progress(batch, "memory", n) == (500, 500) for n in names)


def test_calibration_batch_is_an_ordinary_blinded_pairwise_batch_of_the_most_uncertain_topics():
    from evaluation.calibration import TopicUncertainty, plan_calibration

    ranked = [TopicUncertainty("u", f"s{i}", "topic-1", "x", "y", f"rx{i}", f"ry{i}", {"requirement": 1.5 - i / 10})
              for i in range(12)]
    plan = plan_calibration("", "d", ranked, 10, seed=3, overlap=1, annotators=["a"])
    assert plan.task == "pairwise" and plan.title == "Calibration: 10 most uncertain topics"
    assert sorted(p["sample_id"] for _, p in plan.items) == sorted(f"s{i}" for i in range(10))  # the top 10 only
    assert [p["sample_id"] for _, p in plan.items] != [f"s{i}" for i in range(10)]  # shown in a random order
    swaps = [p["swap"] for _, p in plan.items]
    assert 0 < sum(swaps) < 10  # A/B sides drawn per item: nobody can tell which method is which
    assert all(set(p) == {"user_id", "sample_id", "topic_key", "method_a", "method_b", "run_a", "run_b", "swap"}
               for _, p in plan.items)  # no uncertainty score shown to annotators; it lives in the batch data
    assert plan.data["calibration"]["uncertainty"]["u/s0/topic-1"]["score"] == 1.5
    mixed = [*ranked[:2], TopicUncertainty("u", "s", "t", "x", "z", "a", "b", {"requirement": 2.0})]
    with pytest.raises(ValueError, match="one judged method pair"):
        plan_calibration("", "d", mixed, 3, 1, 1, ["a"])
