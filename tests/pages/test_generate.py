"""AppTest of the Generate page with the schema-driven fake: start a described user, live status, the user
added to the chosen folder with a link to the Users page, step outputs with their prompt versions, a
refused edit naming the field, a saved edit that drops the downstream steps, Resume after a failure."""

from __future__ import annotations

import json

import pytest

from backends.prompts import load_prompt
from palset.loader import load_dataset
from synth.pipeline import Pipeline
from tests.pages.apptest import app_workspace, open_page
from tests.synth.conftest import small_config
from tests.synth.fakes import SchemaLLM, make_llm
from ui import platform_state
from ui.generate import jobs as generate_jobs


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_DATA_ROOTS", str(tmp_path))  # the tests' target folders are under tmp_path
    fake = SchemaLLM()
    client = make_llm(tmp_path / "pal", fake)
    monkeypatch.setattr(platform_state, "llm_client", lambda: client)
    return fake


def run_id_of(at) -> str:
    return at.query_params["run"][0] if isinstance(at.query_params["run"], list) else at.query_params["run"]


def test_start_a_described_user_and_open_it_in_the_users_page(fake, tmp_path):
    at = open_page("generate")
    at.text_area(key="gen_describe").set_value("a 38-year-old bus driver with two children")
    at.number_input(key="gen_months").set_value(1)
    at.text_input(key="gen_out").set_value(str(tmp_path / "out"))
    at.button(key="gen_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    run_id = run_id_of(at)
    generate_jobs.wait(run_id, 120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    info = app_workspace().synth.load(run_id)
    assert info.status == "finished" and info.uid == "0000"
    assert info.config.description.startswith("a 38-year-old bus driver")
    assert list(load_dataset(tmp_path / "out").users) == ["0000"]
    assert any("User 0000 was added" in s.value for s in at.success)
    text = "\n".join(c.value for c in at.caption)
    assert f"synth/profile@v{load_prompt('synth/profile').version}" in text and "Cost so far:" in text
    assert any("Quality report" in h.value for h in at.subheader)

    # the folder is registered for this browser session under a name: the button opens the user in Users
    name = next(n for n, p in at.session_state["added_datasets"].items() if p.resolve() == (tmp_path / "out").resolve())
    assert any(f"/users?dataset={name}&user=0000" in c.value for c in at.caption)
    at.button(key="gen_open_user").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["dataset"] in (name, [name]) and at.query_params["user"] in ("0000", ["0000"])
    assert not any("No user with id" in w.value for w in at.warning)
    assert [t.value for t in at.title] == [load_dataset(tmp_path / "out").users["0000"].name]


def seeded_run(tmp_path, fake) -> Pipeline:
    pipe = Pipeline.create(small_config(months=1), str(tmp_path / "out"), app_workspace().synth, run_id="gen-test",
                           llm=make_llm(tmp_path / "pal", fake))
    return pipe


def test_edits_are_validated_naming_the_field_and_drop_downstream_steps(fake, tmp_path):
    pipe = seeded_run(tmp_path, fake)
    assert pipe.run().status == "finished"
    at = open_page("generate", run="gen-test")
    key = "gen_edit_gen-test_profile"
    bad = dict(pipe.record("profile").output, age="forty")
    at.text_area(key=key).set_value(json.dumps(bad)).run()
    at.button(key=f"{key}_save").click().run()
    assert any(e.value.startswith("age:") for e in at.error)
    assert pipe.pending() == []
    ok = dict(pipe.record("profile").output, name="Rosa Delgado")
    at.text_area(key=key).set_value(json.dumps(ok)).run()
    at.button(key=f"{key}_save").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert pipe.output("profile").name == "Rosa Delgado" and len(pipe.pending()) == 12
    assert any("Press Resume" in s.value for s in at.success)


def test_deeply_nested_json_in_the_editor_is_an_error_not_a_crash(fake, tmp_path):
    """Audit finding 23: pasting deeply nested JSON into a step's editor crashed the page (RecursionError)."""
    pipe = seeded_run(tmp_path, fake)
    assert pipe.run().status == "finished"
    at = open_page("generate", run="gen-test")
    key = "gen_edit_gen-test_profile"
    for text in ("[" * 100_000 + "]" * 100_000, '{"name": ' + "[" * 3_000 + "]" * 3_000 + "}"):
        at.text_area(key=key).set_value(text).run()
        at.button(key=f"{key}_save").click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.error and pipe.output("profile").name != "[]"
    assert pipe.pending() == []  # nothing was dropped


def test_a_failed_run_shows_the_error_and_resumes(fake, tmp_path):
    fake.fail_at["SituationLogsReply"] = 1
    pipe = seeded_run(tmp_path, fake)
    assert pipe.run().status == "failed"
    at = open_page("generate", run="gen-test")
    assert any("scripted failure" in e.value and "Resume" in e.value for e in at.error)
    at.button(key="gen_resume").click().run()
    generate_jobs.wait("gen-test", 60)
    at.run()
    assert app_workspace().synth.load("gen-test").status == "finished"
    assert any("was added" in s.value for s in at.success)


def test_an_unknown_run_falls_back_to_setup(fake):
    at = open_page("generate", run="gen-nope")
    assert any("No generation run" in w.value for w in at.warning)
    assert at.button(key="gen_start")


def test_a_target_folder_outside_the_data_roots_is_refused(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_DATA_ROOTS", str(tmp_path / "pal"))
    at = open_page("generate")
    for outside in ("/", "/etc/cron.d", str(tmp_path / "elsewhere"), str(tmp_path / "pal" / ".." / "x")):
        at.text_input(key="gen_out").set_value(outside)
        at.button(key="gen_start").click().run()
        assert any("outside the folders this server may use" in e.value for e in at.error), outside
        assert "run" not in at.query_params and not app_workspace().synth.list()
