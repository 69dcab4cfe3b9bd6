"""Deleting a review batch: whole (items and assignments with it), and never once somebody has answered."""

from __future__ import annotations

import pytest

from review.store import BatchAnswered
from tests.review.conftest import make_batch


def test_an_unanswered_batch_goes_with_its_items_and_assignments(store):
    keep, gone = make_batch(store, n=4), make_batch(store, n=3, seed=8)
    deleted = store.delete_batch(gone)
    assert (deleted["batch_id"], deleted["items"], deleted["annotators"]) == (gone, 3, ["ann1", "ann2"])
    assert store.batch(gone) is None and store.items(gone) == [] and store.assignments(gone) == {}
    assert [b["batch_id"] for b in store.batches()] == [keep] and len(store.items(keep)) == 4
    with pytest.raises(KeyError, match=gone):
        store.delete_batch(gone)


def test_a_batch_with_an_answer_is_kept_whole(store):
    batch = make_batch(store, n=4)
    store.answer(batch, store.assigned(batch, "ann2")[0], "ann2", "verdict", "correct")
    with pytest.raises(BatchAnswered, match=r"1 annotator\(s\) gave 1 answer\(s\)"):
        store.delete_batch(batch)
    assert len(store.items(batch)) == 4 and store.count_answers(batch) == 1
    store.undo_last(batch, "ann2")  # the answer taken back: nobody's work is lost any more
    assert store.delete_batch(batch)["items"] == 4 and store.batch(batch) is None
