"""``pal review list | delete``: a batch nobody answered in can go (so a run it showed can be recorded anew); a batch
with answers never does, and then nothing is deleted.

Uses the bundled demo users (``data/demo``) with the hash embedder and scripted LLMs (``testkit.worked``)."""

from __future__ import annotations

import json

import pytest

from palset.loader import load_dataset
from testkit.workspace import make_workspace
from tests.conftest import DEMO


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """User 1000's gold and rag-turn runs, judged, and shown in two answered review batches (pairwise, simturn)."""
    from cli import context
    from testkit.worked import fill_home

    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    home = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    fill_home(home, load_dataset(DEMO), ["1000"], review=True, experiment=False)
    context._open.cache_clear()
    yield home
    context._open.cache_clear()


def _take_back_every_answer(ws, batch_id: str) -> None:
    for who in ws.reviews.batch(batch_id)["annotators"]:
        while ws.reviews.undo_last(batch_id, who) is not None:
            pass


def test_an_answered_batch_is_refused_an_unanswered_one_goes_and_its_run_can_then_be_discarded(ws, capsys):
    from cli.main import main

    gold = next(r["run_id"] for r in ws.sims.list() if r["method"] == "gold")
    assert main(["review", "list", "--run", gold, "--json"]) == 0
    showing = json.loads(capsys.readouterr().out)
    assert showing and all(b["answers"] > 0 and b["items"] > 0 for b in showing)
    ids = [b["batch_id"] for b in showing]
    assert main(["review", "delete", *ids, "--yes"]) == 2
    assert "nothing deleted" in capsys.readouterr().err and all(ws.reviews.batch(b) for b in ids)
    for b in ids[1:]:
        _take_back_every_answer(ws, b)
    assert main(["review", "delete", *ids, "--yes"]) == 2  # one still answered: none of them goes
    assert f"{ids[0]}: " in capsys.readouterr().err and all(ws.reviews.batch(b) for b in ids)
    _take_back_every_answer(ws, ids[0])
    assert main(["review", "delete", *ids]) == 1  # without --yes: only what would go
    assert "would delete review batch" in capsys.readouterr().out and all(ws.reviews.batch(b) for b in ids)
    assert main(["runs", "discard", gold, "--yes"]) == 2  # still shown to annotators
    capsys.readouterr()
    assert main(["review", "delete", *ids, "--yes"]) == 0
    assert capsys.readouterr().out.count("deleted review batch") == len(ids)
    assert [ws.reviews.batch(b) for b in ids] == [None] * len(ids)
    assert {e.target for e in ws.audit.entries(action="review.batch_delete")} == set(ids)
    assert main(["review", "list", "--run", gold, "--json"]) == 0 and json.loads(capsys.readouterr().out) == []
    assert main(["runs", "discard", gold, "--yes"]) == 0 and not ws.sims.exists(gold)
    assert main(["review", "delete", ids[0], "--yes"]) == 2 and "no such review batch" in capsys.readouterr().err
