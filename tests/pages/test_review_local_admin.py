"""Under local sign-in the one person is the admin: a batch drawn for others (the demo's) can be previewed as its
annotators get it and annotated by the admin too; an item's content comes before the folded profile."""

from __future__ import annotations

from palset.dataset import dataset_key
from palset.loader import load_dataset
from review.batches import plan_batch, quality_candidates
from tests.conftest import DEMO
from tests.pages.apptest import app_workspace, open_page


def click(at, key: str):
    at.button(key=key).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_local_admin_previews_and_annotates_a_batch_drawn_for_others(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_AUTH", "local")
    store = app_workspace().reviews
    cands = quality_candidates(load_dataset(DEMO))
    batch = store.create_batch(plan_batch("Theirs", "quality", dataset_key(DEMO), cands, 3, 5, 1, ["ann1"]), "boss")
    at = open_page("review", batch=batch)
    assert at.button(key="review_join") and at.button(key="review_preview_open")
    click(at, "review_preview_open")
    assert at.query_params["view"] == "annotator" and "What an annotator sees" in at.info[0].value
    assert any(e.label.startswith("About this user") for e in at.main.expander)  # the profile folds
    click(at, "review_preview_leave")
    assert "view" not in at.query_params
    click(at, "review_join")
    who = store.assignments(batch)
    admins = {n for names in who.values() for n in names if n != "ann1"}
    assert len(who) == 3 and all(len(names) == 2 for names in who.values()) and len(admins) == 1
    assert "review_join" not in [b.key for b in at.button]  # assigned now: nothing more to take
    click(at, "review_start")
    click(at, "review_logs_3")
    assert store.answers(batch, admins.pop())
    entries = app_workspace().audit.entries(limit=10, action="review.batch_join")
    assert [e.target for e in entries] == [batch] and entries[0].detail["items"] == 3
