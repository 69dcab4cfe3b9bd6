"""AppTest of the home tour's Memory stops: each link opens what its text promises — the gold graph with its
time slider, gold beside turn-level RAG on the same query topic, and the Fidelity tab."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from tests.pages.apptest import open_page
from tests.pages.test_memory_fidelity_page import charts, metrics


@pytest.fixture(autouse=True)
def memory_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))


def memory_stops() -> dict[str, dict[str, str]]:
    at = open_page("home")
    return {p.proto.query_string.split("tab=")[1].split("&")[0]: dict(parse_qsl(p.proto.query_string))
            for p in at.get("page_link") if p.proto.page == "memory"}


def iframe_docs(at) -> list[str]:
    found = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if type(child).__name__ == "UnknownElement" and child.type == "iframe":
                found.append(child.proto.srcdoc)
            walk(child)

    walk(at.main)
    return found


def test_the_tour_has_the_three_memory_stops():
    stops = memory_stops()
    assert set(stops) == {"Snapshot", "Retrieval", "Fidelity"}
    assert all(s["method"] == "gold" for s in stops.values())
    assert stops["Retrieval"]["compare"] == "rag-turn" and stops["Retrieval"]["topic"].endswith("/topic-1")


def test_the_graph_stop_shows_the_gold_layers_and_its_time_slider():
    params = memory_stops()["Snapshot"]
    at = open_page("memory", **params)
    slider = at.select_slider(key="mem_session")
    assert slider.value == params["session"]
    docs = iframe_docs(at)
    assert len(docs) == 1 and f"{params['session']}_situation0" in docs[0] and "_principle_" in docs[0]
    assert f"{params['user']}_sample4_situation0" not in docs[0]
    slider.set_value(f"{params['user']}_sample5").run()
    later = iframe_docs(at)[0]
    assert f"{params['user']}_sample4_situation0" in later and later != docs[0]


def test_the_retrieval_stop_puts_gold_beside_rag_on_the_same_topic():
    params = memory_stops()["Retrieval"]
    at = open_page("memory", **params)
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="mem_topic").value == params["topic"] and at.radio(key="mem_purpose").value == "solution"
    headings = [m.value for m in at.markdown if m.value.startswith("####")]
    assert any("oracle upper bound" in h for h in headings) and any("Turn\\-level RAG" in h for h in headings)
    traces = [d.value for d in at.dataframe if "score" in d.value.columns]
    assert len(traces) == 2
    assert {"situation", "topic_outline", "principle"} <= set(traces[0]["layer"])
    assert set(traces[1]["layer"]) <= {"turn", "log"}
    assert len(metrics_all(at, "Prompt tokens")) == 2


def metrics_all(at, label: str) -> list[str]:
    return [m.value for m in at.metric if m.label == label]


def test_the_fidelity_stop_measures_a_baseline_against_gold():
    params = memory_stops()["Fidelity"]
    at = open_page("memory", **params)
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="mem_fid_method").value == "rag-turn"
    assert metrics(at)["Text precision"] not in ("n/a", "")
    assert any(t["name"] == "gold (oracle upper bound)" for t in charts(at)[0]["data"])
