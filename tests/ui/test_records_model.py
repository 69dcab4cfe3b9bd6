"""A page says which model made its records when it is not the configured one, and offers it when it is a local
model installed here (else names how to install it); Simulate opens on a method whose memory needs no LLM build."""

from __future__ import annotations

from backends.config import load_config
from backends.local_models import DEFAULT_LOCAL_MODEL, QWEN15, SMOLLM2
from backends.store.runstore import CallRecord
from memory.methods import get_method_class, method_availability
from tests.pages.apptest import app_workspace, open_page
from ui.methods import default_simulation_method
from ui.records_model import mismatches, model_installed, notice_text, recorded_models
from ui.text import md_escape

USED = [("judge", "local", "e", QWEN15.name, 876), ("judge", "local", "e", DEFAULT_LOCAL_MODEL, 3),
        ("memory_builder", "local", "e", DEFAULT_LOCAL_MODEL, 303), ("assistant", "openai", "e", "gpt-x", 5)]


def test_the_model_that_made_most_of_a_roles_calls_is_its_recorded_model():
    assert recorded_models(USED)["judge"] == ("local", QWEN15.name, 876)


def test_only_roles_recorded_with_another_model_are_named_and_aliases_are_the_same_model():
    cfg = load_config(secrets={}, env={})  # every role on the bundled default model
    found = mismatches(USED, cfg, ["judge", "memory_builder", "assistant", "user_simulator"])
    assert [(m.role, m.recorded) for m in found] == [("judge", QWEN15.name), ("assistant", "gpt-x")]
    judge = found[0]
    installed, hint = model_installed(QWEN15.name)
    assert judge.installed == installed and (installed or "make model-1.5b" in judge.hint)
    assert not found[1].installed and found[1].hint == ""  # a hosted model is named, never offered
    alias = [("judge", "local", "e", QWEN15.key, 9)]
    assert mismatches(alias, load_config(secrets={}, env={"PAL_JUDGE_MODEL": QWEN15.name}), ["judge"]) == []
    text = notice_text(found)
    assert md_escape(QWEN15.name) in text and "judge: 876 calls" in text and md_escape(DEFAULT_LOCAL_MODEL) in text


def test_simulate_defaults_to_a_method_that_needs_no_llm_build():
    methods = [m for m, reason in method_availability().items() if reason is None]
    chosen = default_simulation_method(methods)
    assert not get_method_class(chosen).uses_llm
    assert default_simulation_method(["h2memory", "vanilla"]) == "vanilla"
    assert default_simulation_method(["h2memory"]) == "h2memory"  # nothing else offered


def test_the_simulate_page_names_the_recorded_model_and_switches_this_session_to_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    for role in ("user_simulator", "assistant"):  # an installed local model other than the configured default
        app_workspace().runs.record_call(CallRecord(run_id="run-x", role=role, provider="local", endpoint="e",
                                                    model=SMOLLM2.name))
    at = open_page("simulate")
    assert at.selectbox(key="sim_method").value == default_simulation_method(
        [m for m, r in method_availability().items() if r is None])
    notice = "\n".join(i.value for i in at.info)
    assert md_escape(SMOLLM2.name) in notice and "user simulator, assistant" in notice
    if not model_installed(SMOLLM2.name)[0]:
        return  # offered only where installed (make setup installs it)
    at.button(key="sim_use_recorded").click().run()
    assert not at.exception
    assert at.session_state["llm_overrides"]["assistant"]["model"] == SMOLLM2.name
    assert md_escape(SMOLLM2.name) not in "\n".join(i.value for i in at.info)  # this session now matches its records


def test_the_evaluate_page_names_the_model_that_made_the_judgments(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    app_workspace().runs.record_call(CallRecord(run_id="jdg-x", role="judge", provider="local", endpoint="e",
                                                model=SMOLLM2.name))
    at = open_page("evaluate")
    notice = "\n".join(i.value for i in at.info)
    assert md_escape(SMOLLM2.name) in notice and "judge: 1 calls" in notice
    offered = [b for b in at.button if b.key == "eval_use_recorded"]
    assert bool(offered) == model_installed(SMOLLM2.name)[0]
