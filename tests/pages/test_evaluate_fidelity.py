"""AppTest of the Evaluate page's fidelity leaderboard: measured from the page across methods and users, the reference
rows first (measured with them), then the gold memory labelled an oracle upper bound, each figure with a 95%
bootstrap CI over users and "n/a" with its reason where it cannot be measured; an LLM method that is not built is
skipped with a message."""

import pytest

from evaluation.fidelity.references import REFERENCES
from evaluation.takeaway_words import figure_label, method_label
from tests.pages.apptest import all_markdown, open_page

TEXT_RECALL = figure_label("text_recall")


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")


def board(at, column: str = "method"):
    """The methods' table (``column="reference"``: the reference rows' table, folded under it)."""
    return next(d.value for d in at.dataframe if column in d.value.columns and TEXT_RECALL in d.value.columns)


def share(cell: str) -> tuple[float, float, float]:
    """A cell "45% [40%–50%]" (or "100%") as (value, low, high) shares."""
    value, _, ci = cell.partition(" ")
    lo, hi = ci.strip("[]").split("–") if ci else (value, value)
    v, low, high = (float(x.rstrip("%")) / 100 for x in (value, lo, hi))
    return v, low, high


@pytest.mark.slow(seconds=7)
def test_measure_and_rank_across_methods_and_users():
    at = open_page("evaluate")
    assert any("No fidelity measured" in i.value for i in at.info)
    assert any("pal memory fidelity --dataset" in i.value for i in at.info)  # the command that fills the board
    at.multiselect(key="eval_fid_methods").set_value(["rag-session", "gold", "h2memory"])
    at.multiselect(key="eval_fid_users").set_value(["1000", "1001"])
    at.button(key="eval_fid_run").click().run(timeout=180)
    assert not at.exception, [e.value for e in at.exception]
    skipped = [w.value for w in at.warning]
    assert len(skipped) == 2 and all("h2memory" in w and "build it first" in w for w in skipped)
    at.run()
    frame, refs = board(at), board(at, "reference")
    assert list(frame["method"]) == [method_label("gold"), method_label("rag-session")]
    assert [r.split(" (")[0] for r in refs["reference"]] == [r.label.split(" (")[0] for r in REFERENCES.values()]
    assert refs.iloc[5][figure_label("requirement_f1")] != "n/a" and all(refs["meaning"])
    assert refs.iloc[1][figure_label("situation_within")].startswith("0.00")  # one group per session: κ 0
    assert float(refs.iloc[2][figure_label("situation_within")].split()[0]) > 0.5  # weeks of logs
    assert list(frame["users"]) == [2, 2] and list(refs["users"]) == [2] * 7
    gold, rag = frame.iloc[0], frame.iloc[1]
    assert gold[TEXT_RECALL] == "100%" and gold[figure_label("situation_within")] == "1.00"
    not_measured = rag["not measured"]
    assert rag[figure_label("situation_within")] == "n/a"
    assert f"{figure_label('situation_within')}: rag-session does not group logs" in not_measured
    assert rag[figure_label("requirement_f1")] == "n/a" and "no topic_outline layer" in not_measured  # v3
    value, lo, hi = share(rag[TEXT_RECALL])
    assert lo <= value <= hi
    assert any("bootstrap CI over users" in c.value and "only above the reference rows" in c.value for c in at.caption)
    assert "Session-level RAG keeps" in all_markdown(at)  # the board's takeaway
