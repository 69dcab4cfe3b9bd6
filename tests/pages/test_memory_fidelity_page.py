"""AppTest of the gold memory on the Memory page and its Fidelity tab: the demo opens with gold (built on first
use, labelled an oracle upper bound), the tab plots fidelity over sessions, puts the method beside gold and beside
the reference memories, shows n/a with its reason, lists what it missed, measures a baseline from gold's own page,
and says which files a partial release lacks."""

from __future__ import annotations

import shutil

import pytest

from evaluation.versions import METRIC_VERSIONS
from tests.conftest import DEMO
from tests.pages.apptest import all_markdown, app_workspace, open_page


@pytest.fixture(autouse=True)
def memory_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return tmp_path / "pal"


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def plain(at) -> str:
    """Markdown and captions without Markdown escapes."""
    return all_markdown(at).replace("\\", "")


def frame_with(at, column: str):
    """The first table with this column (tables without selection carry no key in AppTest)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def charts(at) -> list[dict]:
    import json

    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_the_demo_opens_with_the_gold_memory_built_on_first_use():
    at = open_page("memory", user="1003")
    assert at.selectbox(key="mem_method").value == "gold" and at.query_params["method"] == "gold"
    assert metrics(at)["Stages done"] == "18 / 18" and metrics(at)["LLM calls"] == "0"
    assert any("Oracle upper bound" in i.value for i in at.info)
    assert "oracle upper bound" in at.selectbox(key="mem_method").format_func("gold")
    items = at.dataframe(key="mem_items_table").value
    assert set(items["layer"]) == {"log_graph", "situation", "background", "topic_outline", "principle"}


def test_another_dataset_keeps_the_usual_default(small_release, monkeypatch):
    monkeypatch.setenv("PAL_DATASETS", f"other={small_release}")
    at = open_page("memory", dataset="other")
    assert at.selectbox(key="mem_method").value == "h2memory"


@pytest.mark.slow(seconds=5)
def test_fidelity_tab_of_a_baseline(memory_env):
    at = open_page("memory", user="1000", method="rag-session")
    at.button(key="mem_build").click().run()
    at.query_params["tab"] = "Fidelity"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = metrics(at)
    assert shown["Situation κ"] == "n/a" and shown["Text precision"] not in ("n/a", "")
    assert "does not group logs" in next(m.help for m in at.metric if m.label == "Situation κ")
    assert "How close" in plain(at) and "As of 1000_sample8" in plain(at)
    figures = charts(at)
    curves = {t["name"] for t in figures[0]["data"]}
    assert {"text precision", "gold (oracle upper bound)"} <= curves and "situation κ (within sessions)" not in curves
    assert {t["name"] for t in figures[1]["data"]} == {"gold (oracle upper bound)", "rag-session"}
    refs = frame_with(at, "memory")
    assert list(refs["memory"])[:2] == ["ref:empty (empty memory)", "ref:session-groups (one group per session (its "
                                        "logs verbatim))"] and list(refs["memory"])[-1] == "rag-session"
    assert refs.iloc[1]["situation_within"] == "0.000" and refs.iloc[0]["text_precision"] == "n/a"
    assert "means something only above the reference rows" in plain(at)
    misses = frame_with(at, "best match")
    assert len(misses) and set(misses["layer"]) <= {"requirement", "preference", "background"}
    assert "not in the memory" in set(misses["what"])
    sessions = frame_with(at, "split")
    assert list(sessions["session"]) == [f"1000_sample{i}" for i in range(9)]
    stored = app_workspace().fidelity.reports(str(DEMO.resolve()), user_id="1000", method="rag-session")
    assert len(stored) == 1 and stored[0].final.sample_id == "1000_sample8"
    assert stored[0].headline.sample_id == "1000_sample6" and stored[0].metric_version == METRIC_VERSIONS["memory_fidelity"]
    refs_stored = [r for r in app_workspace().fidelity.reports(str(DEMO.resolve()), user_id="1000")
                   if r.method.startswith("ref:")]
    assert {r.method for r in refs_stored} == {"ref:empty", "ref:session-groups", "ref:weeks", "ref:dump", "ref:other-user",
                                               "ref:generic", "ref:gold"}
    # a stricter threshold is a new measurement: precision can only fall
    before = float(shown["Text precision"])
    at.number_input(key="mem_fid_tau_hash").set_value(0.95).run()
    assert float(metrics(at)["Text precision"]) <= before
    assert len([r for r in app_workspace().fidelity.reports(str(DEMO.resolve()), user_id="1000")
                if not r.method.startswith("ref:")]) == 2


def test_on_golds_page_the_tab_measures_a_baseline_built_there():
    at = open_page("memory", user="1001", method="gold", tab="Fidelity")
    assert not at.exception, [e.value for e in at.exception]
    assert any("scores 1.0 on every figure by construction" in i.value for i in at.info)
    assert at.selectbox(key="mem_fid_method").value == "rag-turn"
    shown = metrics(at)
    assert shown["Text precision"] not in ("n/a", "")
    assert shown["Requirement F1"] == "n/a"  # rag-turn keeps no topic outlines: no requirement precision, so no F1
    assert "no topic_outline layer" in next(m.help for m in at.metric if m.label == "Requirement F1")
    assert any(t["name"] == "rag-turn" for t in charts(at)[1]["data"])


def test_a_partial_release_says_which_files_are_missing(tmp_path, monkeypatch):
    root = tmp_path / "partial"
    shutil.copytree(DEMO, root)
    shutil.rmtree(root / "situation")
    monkeypatch.setenv("PAL_DATASETS", f"partial={root}")
    at = open_page("memory", dataset="partial", user="1000", method="gold", tab="Fidelity")
    assert not at.exception, [e.value for e in at.exception]
    shown = metrics(at)
    assert shown["Situation κ"] == "n/a" and shown["Preference F1"] == "n/a" and shown["Text precision"] != "n/a"
    help_text = next(m.help for m in at.metric if m.label == "Situation κ")
    assert "situation/situation.json" in help_text
    assert "situation/situation.json" in plain(at)


def test_simulate_names_gold_an_oracle_upper_bound():
    at = open_page("simulate", user="1000", method="gold")
    assert "oracle upper bound" in at.selectbox(key="sim_method").format_func("gold")
    assert any("gold: an oracle upper bound" in c.value for c in at.caption)
