"""Judge–human agreement: majority votes with ties and splits, orientation, agreement, κ and the confusion table."""

from __future__ import annotations

import pytest

from evaluation.faireval import Judgment
from evaluation.human_agreement import HumanVote, compare, compare_by_aspect, confusion_table, pairwise_votes
from review.batches import BatchPlan
from testkit.workspace import make_workspace

X, Y = "h2memory", "vanilla"


def judgment(topic: str, decision: str, method_a: str = X, method_b: str = Y, aspect: str = "requirement",
             created_at: float = 1.0) -> Judgment:
    return Judgment(judgment_key=f"jdg-{topic}-{aspect}-{method_a}-{created_at}", dataset="d", user_id="u",
                    sample_id="s", topic_key=topic, aspect=aspect, method_a=method_a, method_b=method_b, run_a="ra",
                    run_b="rb", k=1, judge_model="m", prompt_name="p", prompt_version="1", created_at=created_at,
                    texts={}, samples=[], decision=decision)


def vote(topic: str, *favoured: str, aspect: str = "requirement", methods=(X, Y)) -> HumanVote:
    return HumanVote("u", "s", topic, aspect, methods, {f"ann{i}": f for i, f in enumerate(favoured)})


def test_majority_records_ties_and_splits():
    assert vote("t", X, X, Y).majority == X
    assert vote("t", "tie", "tie", X).majority == "tie"
    assert vote("t", X, Y).majority is None and vote("t", X, "tie").majority is None


def test_agreement_kappa_and_confusion_from_x_side():
    votes = [vote("t1", X, X), vote("t2", Y, Y, X), vote("t3", X), vote("t4", Y), vote("t5", "tie", "tie"),
             vote("t6", X, Y), vote("t7", X)]
    judgments = [judgment("t1", "win"), judgment("t2", "lose"), judgment("t3", "win"), judgment("t4", "win"),
                 judgment("t5", "win"), judgment("t6", "lose"), judgment("t8", "tie")]
    r = compare(votes, judgments)
    assert r.pair == (X, Y) and r.items == 7
    assert (r.matched, r.unmatched, r.unmatched_judgments, r.splits) == (6, 1, 1, 1)  # t7 unjudged, t8 unanswered
    assert (r.compared, r.agreements, r.human_ties) == (4, 3, 1)  # t5 (human tie) and t6 (split) left out
    assert r.agreement_rate == pytest.approx(0.75)
    # judge win,lose,win,win vs human win,lose,win,lose: po 3/4, pe 3/4·1/2 + 1/4·1/2 = 1/2 -> κ 0.5
    assert r.kappa == pytest.approx(0.5)
    c = r.confusion
    assert list(c.index) == ["judge win", "judge tie", "judge lose"]
    assert list(c.columns) == ["human win", "human tie", "human lose"]
    assert c.loc["judge win", "human win"] == 2 and c.loc["judge win", "human lose"] == 1
    assert c.loc["judge lose", "human lose"] == 1 and c.loc["judge win", "human tie"] == 1
    assert int(c.to_numpy().sum()) == 5  # the split is not in the table
    assert {row["topic"]: row["human"] for row in r.rows}["t6"] == "split"


def test_orientation_flip_is_normalised():
    """A judgment of Y against X that Y wins is the same as X losing; human items stored either way round."""
    votes = [vote("t1", X, methods=(Y, X)), vote("t2", Y, methods=(X, Y))]
    judgments = [judgment("t1", "lose", method_a=Y, method_b=X), judgment("t2", "win", method_a=Y, method_b=X)]
    r = compare(votes, judgments, pair=(X, Y))
    assert (r.matched, r.compared, r.agreements) == (2, 2, 2)
    assert r.confusion.loc["judge win", "human win"] == 1 and r.confusion.loc["judge lose", "human lose"] == 1
    flipped = compare(votes, judgments, pair=(Y, X))
    assert flipped.confusion.loc["judge win", "human win"] == 1 and flipped.agreement_rate == 1.0
    assert flipped.kappa == pytest.approx(1.0)


def test_ties_are_excluded_from_the_rate_and_the_newest_valid_judgment_counts():
    votes = [vote("t1", X), vote("t2", "tie"), vote("t3", Y)]
    judgments = [judgment("t1", "lose", created_at=1), judgment("t1", "win", created_at=2),
                 judgment("t2", "lose"), judgment("t3", "tie"), judgment("t3", "invalid", created_at=3)]
    r = compare(votes, judgments)
    assert (r.matched, r.compared, r.agreements, r.human_ties, r.judge_ties) == (3, 1, 1, 1, 1)
    assert r.agreement_rate == 1.0 and r.kappa is None  # one category only: κ undefined
    assert compare([vote("t1", X)], []).agreement_rate is None
    assert int(confusion_table([]).to_numpy().sum()) == 0


def test_votes_from_the_review_store_use_the_recorded_order(tmp_path):
    store = make_workspace(tmp_path).reviews
    items = [(f"u/s/t{i}", {"user_id": "u", "sample_id": "s", "topic_key": f"t{i}", "method_a": X, "method_b": Y,
                            "run_a": "ra", "run_b": "rb", "swap": swap}) for i, swap in ((1, False), (2, True))]
    plan = BatchPlan("P", "pairwise", "d", 1, 2, ["a1", "a2"], "", items)
    bid = store.create_batch(plan, "boss")
    for who in ("a1", "a2"):
        store.answer(bid, 1, who, "requirement", "A")  # shown A is X
        store.answer(bid, 2, who, "requirement", "A")  # swapped: shown A is Y
        store.answer(bid, 2, who, "preference", "tie" if who == "a1" else "B")
    votes = pairwise_votes(store, dataset="d")
    assert {(v.topic_key, v.aspect): v.majority for v in votes} == {
        ("t1", "requirement"): X, ("t2", "requirement"): Y, ("t2", "preference"): None}
    reports = compare_by_aspect(votes, [judgment("t1", "win"), judgment("t2", "win", method_a=Y, method_b=X),
                                        judgment("t2", "lose", aspect="preference")])
    assert list(reports) == ["requirement", "preference"]
    assert reports["requirement"].agreements == 2 and reports["preference"].splits == 1
    assert pairwise_votes(store, dataset="other") == []


def test_fleiss_kappa_on_non_tie_items_in_mem_pal_table_12_form():
    """By hand: judge + 2 annotators on 4 non-tie items (w w w / l l l / w w l / w l l):
    P̄ = 2/3, Pe = 1/2 → κ = 1/3. The annotators alone on 5 non-tie items (ww ll wl ll ww): P̄ = 4/5 → κ = 0.6."""
    votes = [vote("t1", X, X), vote("t2", Y, Y), vote("t3", X, Y), vote("t4", Y, Y), vote("t5", X, X),
             vote("t6", "tie", X)]
    judgments = [judgment("t1", "win"), judgment("t2", "lose"), judgment("t3", "win"), judgment("t4", "win"),
                 judgment("t5", "tie"), judgment("t6", "win")]
    r = compare(votes, judgments)
    assert r.fleiss == pytest.approx(1 / 3) and (r.fleiss_items, r.fleiss_raters) == (4, 3)
    assert r.fleiss_humans == pytest.approx(0.6) and r.fleiss_humans_items == 5
    assert r.kappa is not None  # Cohen's κ against the majority is still reported next to it
    assert compare([vote("t1", "tie")], [judgment("t1", "tie")]).fleiss is None  # nothing without ties
