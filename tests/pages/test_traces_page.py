"""AppTest of the Traces page: the index of runs that called an LLM, filtered; ``?run=`` opens one as a tree whose
steps hold their calls, searchable; an unknown run says so."""

from __future__ import annotations

from backends.store.runstore import CallRecord
from tests.pages.apptest import all_markdown, app_workspace, open_page


def record(runs, run_id: str, role: str, **kw) -> None:
    runs.record_call(CallRecord(run_id=run_id, role=role, provider="fake", endpoint="e", model=kw.pop("model", "m"),
                                prompt_name=f"p/{role}", tokens_in=100, tokens_out=5, latency_ms=200.0, **kw))


def test_the_index_filters_runs_and_a_run_opens_as_its_call_tree(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    runs = app_workspace().runs
    record(runs, "jdg-1", "judge")
    record(runs, "jdg-1", "judge", error="timeout after 60 s", attempts=3)
    record(runs, "h2memory-u-1", "memory_builder", model="other")
    at = open_page("traces")
    index = at.dataframe[0].value
    assert set(index["run"]) == {"jdg-1", "h2memory-u-1"}
    assert dict(zip(index["run"], index["kind"], strict=True)) == {"jdg-1": "judgment", "h2memory-u-1": "build"}
    at.checkbox(key="traces_err").check().run()
    assert list(at.dataframe[0].value["run"]) == ["jdg-1"]
    at.checkbox(key="traces_err").uncheck().run()
    at.text_input(key="traces_q").input("other").run()
    assert list(at.dataframe[0].value["run"]) == ["h2memory-u-1"]

    at = open_page("traces", run="jdg-1")
    tree = at.dataframe[0].value
    assert list(tree["kind"]) == ["judgment", "call", "call"]  # no record of it: its calls under the root
    assert list(tree["error"])[1:] == ["", "timeout after 60 s"]
    assert [m.value for m in at.metric][:3] == ["2", "1", "1"]  # calls, failed, retried
    at.text_input(key="trace_q").input("timeout").run()
    assert list(at.dataframe[0].value["kind"]) == ["judgment", "call"]
    assert any(b.proto.label == "Download trace (JSON)" for b in at.get("download_button"))


def test_an_unknown_run_says_nothing_was_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    at = open_page("traces", run="run-nope")
    assert "Nothing recorded under" in "\n".join(i.value for i in at.info) + all_markdown(at)
