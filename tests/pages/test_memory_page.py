"""AppTest of the Memory page: build through the button, time slider, diff, retrieval trace, side by side,
detail panel with edit and forget, errors as messages, escaping."""

import re

import pytest

from backends.llm.errors import EndpointUnavailable
from memory.build import MemoryBuilder
from memory.store import dialogue_stage
from palset.loader import load_dataset
from tests.conftest import DEMO, read, write
from tests.pages.apptest import all_markdown, app_workspace, open_page

UNESCAPED_TAG = re.compile(r"(?<!\\)<(script|img)\b")


@pytest.fixture(autouse=True)
def memory_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return tmp_path / "pal"


def prebuild(dataset_path, uid: str, method: str) -> MemoryBuilder:
    """The same build the page makes (hash embedder, default config), made here."""
    builder = app_workspace().open_builder(load_dataset(dataset_path), uid, method)
    builder.run()
    return builder


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def metric_values(at, label: str) -> list[str]:
    return [m.value for m in at.metric if m.label == label]


def trace_frame(at):
    """The first table of retrieved items (it has a score column)."""
    return next(d.value for d in at.dataframe if "score" in d.value.columns)


def iframes(at) -> list:
    found = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if type(child).__name__ == "UnknownElement" and child.type == "iframe":
                found.append(child.proto)
            walk(child)

    walk(at.main)
    return found


def test_build_button_builds_and_shows_the_snapshot_graph_and_items():
    at = open_page("memory", user="1001", method="rag-turn")
    assert any("Nothing built yet" in i.value for i in at.info)
    assert metrics(at)["Stages done"] == "0 / 18"
    at.button(key="mem_build").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert metrics(at)["Stages done"] == "18 / 18" and not at.error
    assert at.query_params["session"] == "1001_sample8" and at.query_params["tab"] == "Snapshot"
    frames = iframes(at)
    selected = at.selectbox(key="mem_item").value
    assert len(frames) == 1 and "new vis.Network" in frames[0].srcdoc and selected in frames[0].srcdoc
    items = at.dataframe(key="mem_items_table").value
    user = load_dataset(DEMO).users["1001"]
    assert len(items) == sum(len(s.logs) + len(s.turns) for s in user.sessions) - _forget_turns(user)
    assert {"turn", "log"} == set(items["layer"]) and selected in set(items["id"])
    focus = next(t for t in at.toggle if t.label == "Focus on the selected item")
    assert focus.value and "1001_sample8_turn1" not in frames[0].srcdoc  # many items: the selection's neighbourhood
    focus.set_value(False).run()
    assert "1001_sample8_turn1" in iframes(at)[0].srcdoc  # the whole build


def _forget_turns(user) -> int:
    from memory.base import forget_requests

    return sum(len(forget_requests(s)) for s in user.sessions)


def test_slider_and_diff_show_the_memory_as_of_a_session():
    builder = prebuild(DEMO, "1001", "rag-turn")
    at = open_page("memory", user="1001", method="rag-turn", session="1001_sample3", tab="Changes")
    assert at.select_slider(key="mem_session").value == "1001_sample3"
    diff = builder.store.diff(builder.build_id, dialogue_stage(3), since=dialogue_stage(2))
    assert metrics(at)["Added"] == str(len(diff.added)) and int(metrics(at)["Added"]) > 0
    assert set(at.dataframe[0].value["id"]) == {i.id for i in diff.added}
    assert all(i.session_id == "1001_sample3" for i in diff.added)

    at.select_slider(key="mem_session").set_value("1001_sample0").run()
    assert at.query_params["session"] == "1001_sample0"
    first = builder.store.items_as_of(builder.build_id, dialogue_stage(0))
    assert metrics(at)["Added"] == str(len(first))
    at.query_params["tab"] = "Snapshot"
    at.run()
    assert len(at.dataframe(key="mem_items_table").value) == len(first)


def test_retrieval_trace_shows_items_blocks_and_tokens_side_by_side():
    prebuild(DEMO, "1001", "rag-turn")
    at = open_page("memory", user="1001", method="rag-turn", tab="Retrieval")
    assert at.selectbox(key="mem_topic").value == "1001_sample7/topic-1"
    tokens, full = int(metrics(at)["Prompt tokens"].replace(",", "")), int(metrics(at)["Full history"].replace(",", ""))
    assert 0 < tokens < full
    trace = trace_frame(at)
    assert len(trace) == 6 and set(trace["layer"]) == {"turn", "log"}
    assert all(s < "1001_sample7" for s in trace["session"])  # nothing from the query session's own dialogue
    assert len(at.code) == 3 and "Related turns" in all_markdown(at)

    at.selectbox(key="mem_compare").select("vanilla-log").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["compare"] == "vanilla-log"
    assert len(metric_values(at, "Prompt tokens")) == 2
    assert len(metric_values(at, "Full history")) == 2 and len(set(metric_values(at, "Full history"))) == 1
    assert "None: this method retrieves nothing" in all_markdown(at)
    assert len(at.code) == 4  # 3 blocks for RAG, 1 (current logs) for vanilla with log

    at.radio(key="mem_purpose").set_value("solution").run()
    assert "Requirement:" in all_markdown(at)
    at.radio(key="mem_query_source").set_value("Own query").run()
    at.text_input(key="mem_query_text").input("hardware store loan").run()
    assert len(trace_frame(at)) == 6


def test_forget_removes_an_item_from_the_next_trace():
    prebuild(DEMO, "1001", "rag-turn")
    at = open_page("memory", user="1001", method="rag-turn", tab="Retrieval")
    first = trace_frame(at)["id"].iloc[0]
    at = open_page("memory", user="1001", method="rag-turn", tab="Snapshot", item=first)
    assert at.selectbox(key="mem_item").value == first
    at.button(key="mem_forget").click().run()
    assert any(f"Forgot {first}" in s.value.replace("\\", "") and "0 derived" in s.value for s in at.success)
    assert first not in set(at.dataframe(key="mem_items_table").value["id"])
    at.query_params["tab"] = "Retrieval"
    at.run()
    assert first not in set(trace_frame(at)["id"])


def test_detail_resolves_provenance_and_edit_saves_text():
    builder = prebuild(DEMO, "1001", "rag-turn")
    at = open_page("memory", user="1001", method="rag-turn", tab="Snapshot", item="1001_sample2_turn3")
    prov = next(d.value for d in at.dataframe if list(d.value.columns) == ["source", "text"])  # the item's sources
    turn = load_dataset(DEMO).users["1001"].session("1001_sample2").turns[2]
    assert list(prov["source"]) == ["turn:1001_sample2:3"] and turn.user.content in prov["text"].iloc[0]
    at.text_area(key=f"mem_edit_{builder.build_id}_1001_sample2_turn3").input("user: edited by a person").run()
    at.button(key="mem_save").click().run()
    assert any("Saved" in s.value for s in at.success)
    assert "edited by a person" in all_markdown(at)


def test_a_build_error_is_a_message_not_a_traceback(monkeypatch):
    def fail(self, *args, **kwargs):
        raise EndpointUnavailable("memory_builder: cannot reach 127.0.0.1:9 (connection refused)")

    monkeypatch.setattr(MemoryBuilder, "run", fail)
    at = open_page("memory", user="1001", method="rag-turn")
    at.button(key="mem_build").click().run()
    assert not at.exception
    assert any("Build stopped" in e.value and "connection refused" in e.value for e in at.error)


def test_text_from_data_is_escaped(small_release, monkeypatch):
    path = small_release / "input.json"
    data = read(path)
    data["0000"]["history"][0]["logs"][0]["content"] = "<script>alert('x')</script> **loud**"
    write(path, data)
    monkeypatch.setenv("PAL_DATASETS", f"evil={small_release}")
    prebuild(small_release, "0000", "rag-turn")
    user = load_dataset(small_release).users["0000"]
    at = open_page("memory", dataset="evil", user="0000", method="rag-turn", session=user.sessions[0].sample_id,
                   item=f"{user.sessions[0].sample_id}_log0")
    text = all_markdown(at)
    assert "alert" in text and not UNESCAPED_TAG.search(text) and "**loud**" not in text
    srcdoc = iframes(at)[0].srcdoc
    assert "<script>alert" not in srcdoc and "\\u0026lt;script\\u0026gt;alert" in srcdoc


def test_a_method_that_fails_to_import_is_listed_with_its_reason(monkeypatch):
    from memory.methods import METHODS, method_availability

    monkeypatch.setitem(METHODS, "broken-method", "memory.methods.not_installed_here:Gone")
    method_availability.cache_clear()
    try:
        at = open_page("memory", user="1000", method="rag-turn")
    finally:
        method_availability.cache_clear()
    assert "broken-method" not in at.selectbox(key="mem_method").options
    text = all_markdown(at)
    assert "Not available in this install" in text and "broken" in text and "not\\_installed\\_here" in text
def test_edits_keep_every_previous_text_and_edits_and_forgets_are_audited():

    builder = prebuild(DEMO, "1001", "rag-turn")
    item_id = "1001_sample2_turn3"
    latest = builder.store.done_stages(builder.build_id)[-1]
    original = next(i.text for i in builder.store.items_as_of(builder.build_id, latest) if i.id == item_id)
    at = open_page("memory", user="1001", method="rag-turn", tab="Snapshot", item=item_id)
    for text in ("user: first edit", "user: second edit"):
        at.text_area(key=f"mem_edit_{builder.build_id}_{item_id}").input(text).run()
        at.button(key="mem_save").click().run()
    history = builder.store.edit_history(builder.build_id, item_id)
    assert [(h["previous_text"], h["new_text"], h["editor"]) for h in history] == [
        (original, "user: first edit", "local"), ("user: first edit", "user: second edit", "local")]
    shown = next(d.value for d in at.dataframe if "previous text" in d.value.columns)
    assert list(shown["previous text"]) == [original, "user: first edit"]
    at.button(key="mem_forget").click().run()
    log = app_workspace().audit.entries()
    assert [e.action for e in log] == ["memory.forget", "memory.edit", "memory.edit"]
    assert all(e.actor == "local" and e.target == f"{builder.build_id}/{item_id}" for e in log)
    assert item_id in log[0].detail["forgotten"]


def test_the_build_panel_says_how_much_of_the_prompt_the_servers_cache_served():
    from backends.config import load_config
    from testkit.fault_server import serving
    from testkit.slot_server import SlotServer

    server = SlotServer(latency=0.0, slots=2)
    with serving(server.httpd):
        config = load_config(secrets={}, env={"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_MODEL": "slot-model",
                                              "PAL_DEFAULT_BASE_URL": server.base_url})
        ws = app_workspace()
        builder = ws.open_builder(load_dataset(DEMO), "1000", "h2memory", llm=ws.with_config(config).llm())
        builder.run(until_session=0)
    totals = ws.runs.totals(run_id=builder.build_id)
    at = open_page("memory", user="1000", method="h2memory")
    assert not at.exception, [e.value for e in at.exception]
    line = next(c.value for c in at.caption if "served from the server's cache" in c.value)
    assert f"{totals.tokens_cached / totals.tokens_reported:.0%} of {totals.tokens_reported:,}" in line
