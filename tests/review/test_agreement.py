"""κ against textbook examples, through the same code the batches use (statsmodels underneath)."""

import pytest

from review.agreement import batch_agreement, cohen, disagreements, fleiss
from tests.review.conftest import make_batch

# Fleiss (1971) as on Wikipedia: 10 subjects, 14 raters, 5 categories → κ ≈ 0.210
FLEISS_TABLE = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def test_fleiss_on_the_textbook_table():
    cats = ["1", "2", "3", "4", "5"]
    ratings = [[c for c, n in zip(cats, row) for _ in range(n)] for row in FLEISS_TABLE]
    assert fleiss(ratings, cats) == pytest.approx(0.210, abs=5e-4)


def test_cohen_on_the_textbook_example():
    # Wikipedia: 50 proposals, yes/yes 20, yes/no 5, no/yes 10, no/no 15 → κ = 0.4
    rows = [["y", "y"]] * 20 + [["y", "n"]] * 5 + [["n", "y"]] * 10 + [["n", "n"]] * 15
    assert cohen(rows, ["y", "n"]) == pytest.approx(0.4)


def test_cohen_counts_unused_categories():
    rows = [["correct", "correct"], ["incorrect", "incorrect"], ["correct", "incorrect"]]
    assert cohen(rows, ["correct", "incorrect", "unsupported"]) == pytest.approx(cohen(rows, ["correct", "incorrect"]))


def test_batch_agreement_picks_cohen_for_two_and_fleiss_for_three(store):
    two = make_batch(store, n=4)
    for no, (x, y) in enumerate([("correct", "correct"), ("incorrect", "incorrect"), ("correct", "unsupported"),
                                 ("unsupported", "unsupported")], start=1):
        store.answer(two, no, "ann1", "verdict", x)
        store.answer(two, no, "ann2", "verdict", y)
    (row,) = batch_agreement(store, two)
    assert row["method"] == "Cohen" and row["items"] == 4
    assert row["kappa"] == pytest.approx(cohen([["correct", "correct"], ["incorrect", "incorrect"],
                                                ["correct", "unsupported"], ["unsupported", "unsupported"]],
                                               ["correct", "incorrect", "unsupported"]))
    assert disagreements(store, two) == [{"item_no": 3, "question": "verdict",
                                          "answers": {"ann1": "correct", "ann2": "unsupported"}}]
    three = make_batch(store, n=3, annotators=("a", "b", "c"), overlap=3)
    for no in (1, 2, 3):
        for who in "abc":
            store.answer(three, no, who, "verdict", "correct" if (no, who) != (2, "c") else "incorrect")
    (row,) = batch_agreement(store, three)
    assert row["method"] == "Fleiss" and row["items"] == 3 and row["kappa"] is not None
