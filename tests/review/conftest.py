"""A temporary run store for review tests."""

import pytest

from backends.paths import StatePaths
from review.batches import plan_batch
from review.store import ReviewStore
from testkit.workspace import make_workspace


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return StatePaths(tmp_path / "pal").runs_db


@pytest.fixture
def review_ws(db):
    return make_workspace(db.parent)


@pytest.fixture
def store(review_ws):
    return review_ws.reviews


@pytest.fixture
def accounts(review_ws):
    return review_ws.accounts


def memory_items(n: int) -> list[tuple[str, dict]]:
    return [(f"build/m{i:04d}", {"build_id": "build", "item_id": f"m{i:04d}", "layer": "fact", "text": f"fact {i}",
                                 "session_id": "s1", "provenance": []}) for i in range(n)]


def make_batch(store: ReviewStore, task="memory", n=10, annotators=("ann1", "ann2"), overlap=2, seed=7, candidates=None):
    plan = plan_batch("t", task, "demo", candidates or memory_items(max(n, 1)), n, seed, overlap, list(annotators))
    return store.create_batch(plan, "admin")
