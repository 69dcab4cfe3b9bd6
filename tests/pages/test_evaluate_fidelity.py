"""AppTest of the Evaluate page's fidelity leaderboard: measured from the page across methods and users, the reference
rows first (measured with them), then the gold memory labelled an oracle upper bound, each figure with a 95%
bootstrap CI over users and "n/a" with its reason where it cannot be measured; an LLM method that is not built is
skipped with a message."""

import pytest

from tests.pages.apptest import open_page


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")


def board(at):
    return next(d.value for d in at.dataframe if "text_recall" in d.value.columns)


@pytest.mark.slow(seconds=7)
def test_measure_and_rank_across_methods_and_users():
    at = open_page("evaluate")
    assert any("No fidelity measured" in i.value for i in at.info)
    at.multiselect(key="eval_fid_methods").set_value(["rag-session", "gold", "h2memory"])
    at.multiselect(key="eval_fid_users").set_value(["1000", "1001"])
    at.button(key="eval_fid_run").click().run(timeout=180)
    assert not at.exception, [e.value for e in at.exception]
    skipped = [w.value for w in at.warning]
    assert len(skipped) == 2 and all("h2memory" in w and "build it first" in w for w in skipped)
    at.run()
    frame = board(at)
    assert list(frame["kind"]) == ["reference"] * 7 + ["oracle", "method"]
    assert list(frame["row"])[7:] == ["gold (oracle upper bound)", "rag-session"]
    assert list(frame["row"])[5].startswith("ref:generic") and frame.iloc[5]["requirement_f1"] != "n/a"
    assert list(frame["row"])[1].startswith("ref:session-groups") and frame.iloc[1]["situation_within"].startswith("0.000")
    weeks = frame.iloc[2]
    assert weeks["row"].startswith("ref:weeks") and float(weeks["situation_within"].split()[0]) > 0.5
    assert list(frame["users"]) == [2] * 9
    gold = frame.iloc[7]
    assert gold["text_recall"] == "1.000 [1.000, 1.000]" and gold["situation_within"] == "1.000 [1.000, 1.000]"
    rag = frame.iloc[8]
    assert rag["situation_within"] == "n/a" and "situation_within: rag-session does not group logs" in rag["not measured"]
    assert rag["requirement_f1"] == "n/a" and "no topic_outline layer" in rag["not measured"]  # v3: no such layer
    value, ci = rag["text_recall"].split(" ", 1)
    lo, hi = (float(x) for x in ci.strip("[]").split(", "))
    assert lo <= float(value) <= hi
    assert any("bootstrap CI over users" in c.value and "only above the reference rows" in c.value for c in at.caption)
