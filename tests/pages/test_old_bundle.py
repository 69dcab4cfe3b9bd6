"""A bundle recorded under fidelity v1 (the demo bundle shipped until the re-recording, kept in ``bundles/``):
presented, its fidelity reports still open — on the Evaluate leaderboard and the Memory page's Fidelity tab — marked
stale, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.takeaway_words import figure_label
from tests.pages.apptest import open_page

OLD_BUNDLE = Path(__file__).parent / "bundles" / "demo-fidelity-v1.palbundle"

pytestmark = pytest.mark.slow(seconds=5)


@pytest.fixture(autouse=True)
def present(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_PRESENT", str(OLD_BUNDLE))


def test_the_v1_reports_of_the_shipped_bundle_open_marked_stale():
    at = open_page("evaluate", section="leaderboards", timeout=300)
    assert any("older definition of fidelity" in w.value for w in at.warning)
    board = next(d.value for d in at.dataframe if "definition" in d.value.columns and "method" in d.value.columns)
    rows = board[board["method"].str.contains("Turn-level RAG|Ground truth", regex=True)]
    assert len(rows) and all(s.endswith("(stale)") for s in rows["definition"])
    situation = figure_label("situation_within")
    assert all(v == "n/a" for v in rows[situation])  # a v2 figure v1 did not have: n/a, never 0
    at = open_page("memory", user="1000", method="rag-turn", tab="Fidelity", timeout=300)
    assert any("stale" in w.value and "measure again" in w.value for w in at.warning)
    assert any(m.label == "Text precision" for m in at.metric)
