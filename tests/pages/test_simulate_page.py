"""AppTest of the Simulate page with a scripted LLM: a full fixed run, takeover by a person, Stop and Resume,
errors as messages, the ?run= deep link (replay) and two methods side by side."""

import pytest

from backends.config import ROLES, load_config
from backends.llm.errors import EndpointUnavailable
from backends.llm.fake import ScriptedLLM
from palset.loader import load_dataset
from sim.schedule import fixed_schedule
from sim.service import make_spec
from sim.store import run_id_for
from tests.conftest import DEMO
from tests.pages.apptest import app_workspace, open_page
from tests.sim.conftest import default_reply, side_of
from ui import platform_state
from ui.text import md_escape

UID, SAMPLE, TOPIC = "1001", "1001_sample7", "topic-1"


def reply(req) -> str:
    """The shared scripted reply, with markdown in the assistant's text (it must show literally)."""
    text = default_reply(req)
    return text + " **loud**" if side_of(req) == "assistant" else text


@pytest.fixture
def llm(tmp_path, monkeypatch):
    """The page's LLM client: a scripted fake for every role, over a temporary PAL_HOME."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    fake = ScriptedLLM(reply)
    client = app_workspace().with_config(load_config(secrets={}, env={})).llm(providers=dict.fromkeys(ROLES, fake))
    monkeypatch.setattr(platform_state, "llm_client", lambda: client)
    return fake


def schedule_len() -> int:
    return len(fixed_schedule(load_dataset(DEMO), f"{SAMPLE}_{TOPIC}")[0])


def spec(method="vanilla-log"):
    return make_spec(load_dataset(DEMO), UID, SAMPLE, TOPIC, method)


def start(method="vanilla-log", compare=None, hold_user=False):
    """Open the page, pick the method(s), optionally take the user side beforehand, press Start."""
    params = {"user": UID, "method": method, **({"compare": compare} if compare else {})}
    at = open_page("simulate", **params)
    assert at.selectbox(key=f"sim_topic_{UID}").value == f"{SAMPLE}/{TOPIC}"  # query sessions come first
    if hold_user:
        at.session_state[f"sim_hold_user_{run_id_for(spec(method))}"] = "Me"
    at.button(key="sim_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def transcript(at) -> list[tuple[str, str]]:
    """(speaker, markdown) of every chat message on the page."""
    return [(m.name, m.markdown[0].value) for m in at.chat_message]


def test_a_full_fixed_run_renders_every_utterance_with_its_act(llm):
    at = start()
    run_id = run_id_for(spec())
    assert at.query_params["run"] == run_id
    rec = app_workspace().sims.load(run_id)
    assert rec.status == "finished" and len(rec.utterances) == 2 * schedule_len()
    shown = transcript(at)
    assert [name for name, _ in shown] == ["User (simulator)", "Assistant"] * schedule_len()
    for (_, text), utt in zip(shown, rec.utterances):
        assert f"-badge[{utt.act.value}]" in text
    assert "\\*\\*loud\\*\\*" in shown[1][1]  # data text is escaped
    assert len(at.expander) >= 2 * schedule_len() and "Memory context" in "\n".join(c.value for c in at.caption)
    assert not at.error and not at.button_group  # finished: no takeover controls
    assert {b.label for b in at.get("download_button")} == {"Export JSON", "Export Markdown"}


def test_a_retrieval_turn_says_which_memory_an_earlier_note_already_showed(llm):
    """rag-turn with the same query each turn: from the second assistant turn on, the page says the note does not
    repeat what an earlier turn's note (still in the transcript) shows."""
    at = start("rag-turn")
    rec = app_workspace().sims.load(run_id_for(spec("rag-turn")))
    assert rec.status == "finished"
    captions = "\n".join(c.value for c in at.caption)
    repeated = [u for u in rec.utterances if u.side == "assistant" and (u.trace or {}).get("repeated")]
    assert repeated and f"{len(repeated[0].trace['repeated'])} of the memory's parts were already" in captions
    assert f"Memory context: {repeated[0].trace['tokens']:,} tokens new in this turn's note" in captions


def test_a_person_takes_over_the_user_side_then_hands_it_back(llm):
    at = start(hold_user=True)
    run_id = run_id_for(spec())
    assert app_workspace().sims.load(run_id).utterances == []  # paused at the first user turn
    at.chat_input(key=f"sim_say_{run_id}").set_value("   ").run()
    assert any("empty" in w.value for w in at.warning) and app_workspace().sims.load(run_id).utterances == []
    at.chat_input(key=f"sim_say_{run_id}").set_value("I want somewhere quiet to eat tonight").run()
    rec = app_workspace().sims.load(run_id)
    assert [(u.side, u.actor) for u in rec.utterances] == [("user", "human"), ("assistant", "assistant")]
    assert transcript(at)[0][0] == "Person (as user)"
    assert at.chat_input(key=f"sim_say_{run_id}")  # waiting for the person again (turn 2)

    at.button_group(key=f"sim_hold_user_{run_id}").set_value("Simulator").run()
    at.button(key="sim_continue").click().run()
    assert not at.exception, [e.value for e in at.exception]
    rec = app_workspace().sims.load(run_id)
    assert rec.status == "finished" and len(rec.utterances) == 2 * schedule_len()
    assert [u.actor for u in rec.utterances if u.side == "user"][1:] == ["simulator"] * (schedule_len() - 1)


def test_stop_keeps_the_saved_turns_and_resume_continues(llm):
    at = start(hold_user=True)
    run_id = run_id_for(spec())
    at.chat_input(key=f"sim_say_{run_id}").set_value("Dinner plans, please").run()
    at.button(key="sim_stop").click().run()
    rec = app_workspace().sims.load(run_id)
    assert rec.status == "stopped" and len(rec.utterances) == 2
    assert len(transcript(at)) == 2

    at.button_group(key=f"sim_hold_user_{run_id}").set_value("Simulator").run()
    at.button(key="sim_resume").click().run()
    rec = app_workspace().sims.load(run_id)
    assert rec.status == "finished" and len(rec.utterances) == 2 * schedule_len()
    assert rec.utterances[0].content == "Dinner plans, please"


def test_an_llm_error_is_a_message_and_the_run_resumes(llm, monkeypatch):
    def down(req):
        if side_of(req) == "assistant":
            raise EndpointUnavailable("assistant: cannot reach 127.0.0.1:9 (connection refused)")
        return reply(req)

    monkeypatch.setattr(llm, "_fn", down)
    at = start()
    run_id = run_id_for(spec())
    assert any("connection refused" in e.value and "Resume" in e.value for e in at.error)
    rec = app_workspace().sims.load(run_id)
    assert rec.status == "failed" and len(rec.utterances) == 1

    monkeypatch.setattr(llm, "_fn", reply)
    at.button(key="sim_resume").click().run()
    assert not at.error and app_workspace().sims.load(run_id).status == "finished"


def test_run_deep_link_replays_a_stored_run(llm):
    dataset = load_dataset(DEMO)
    sim = app_workspace().open_simulation(dataset, spec(), platform_state.llm_client())
    sim.step()
    sim.step()
    sim.stop()
    at = open_page("simulate", run=sim.record.run_id)
    assert [name for name, _ in transcript(at)] == ["User (simulator)", "Assistant"]
    assert not at.button_group and not at.chat_input  # read-only
    assert any("stopped" in m.value for m in at.markdown)
    at.button(key="sim_resume_replay").click().run()
    assert app_workspace().sims.load(sim.record.run_id).status == "finished"
    assert len(transcript(at)) == 2 * schedule_len()


def test_two_methods_side_by_side_show_two_transcripts(llm):
    at = start(method="vanilla-log", compare="vanilla")
    a, b = app_workspace().sims.load(run_id_for(spec("vanilla-log"))), app_workspace().sims.load(run_id_for(spec("vanilla")))
    assert a.status == b.status == "finished" and a.pair_id == b.pair_id is not None
    assert len(transcript(at)) == 2 * 2 * schedule_len()
    assert a.utterances[1].trace is not None and b.utterances[1].trace is None  # vanilla has no memory
    assert b.utterances[0].created_at < a.utterances[-1].created_at  # steps alternate between the runs
    headers = [m.value.replace("\\", "") for m in at.markdown if m.value.startswith("####")]
    assert len(headers) == 2 and "(vanilla-log)" in headers[0] and "(vanilla)" in headers[1]

    replay = open_page("simulate", run=b.run_id)  # the pair is found from either run
    assert len(transcript(replay)) == 2 * 2 * schedule_len()


def test_free_mode_runs_up_to_the_max_turns(llm):
    at = open_page("simulate", user=UID, method="vanilla-log")
    at.button_group(key="sim_mode").set_value("free").run()
    at.number_input(key="sim_max_turns").set_value(2).run()
    at.button(key="sim_start").click().run()
    rec = app_workspace().sims.load(at.query_params["run"])
    assert rec.spec.mode == "free" and rec.status == "finished" and len(rec.utterances) == 4
    assert [u.act.value for u in rec.utterances][:2] == ["Topic Inquiry", "Requirement Prediction"]


def test_runs_list_shows_stored_runs(llm):
    start()
    at = open_page("simulate", tab="Runs")
    frame = at.dataframe(key="sim_runs_table").value
    assert list(frame["run_id"]) == [run_id_for(spec())]
    assert frame["status"].iloc[0] == "finished" and frame["turns"].iloc[0] == schedule_len()


def test_a_run_driven_elsewhere_is_followed_read_only(llm):
    from backends.store.leases import process_holder

    dataset = load_dataset(DEMO)
    sim = app_workspace().open_simulation(dataset, spec(), platform_state.llm_client())
    sim.driver = process_holder("pal simulate batch-1")  # this (living) process drives it
    sim.step()
    asked = len(llm.requests)
    at = start()  # a tab presses Start on the same settings
    assert any("running elsewhere" in i.value.lower() for i in at.info)
    assert not at.button_group and not at.chat_input and not any(b.key == "sim_resume_replay" for b in at.button)
    assert len(transcript(at)) == 1 and len(llm.requests) == asked  # nothing driven here
    assert app_workspace().sims.driver(sim.record.run_id).holder == sim.driver
    sim.step()
    at.run()  # the follower shows what the other driver wrote
    assert len(transcript(at)) == 2
    sim.stop()  # the other driver lets go: the run can be resumed here
    at = open_page("simulate", run=sim.record.run_id)
    assert any(b.key == "sim_resume_replay" for b in at.button)
def test_reasoning_shows_apart_and_a_fitted_prompt_says_what_was_cut(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")

    def thinking(req):
        return "<think>SECRET-THOUGHT {\"content\": \"no\"}</think>" + reply(req)

    fake = ScriptedLLM(thinking, window=4096)
    client = app_workspace().with_config(load_config(secrets={}, env={})).llm(providers=dict.fromkeys(ROLES, fake))
    monkeypatch.setattr(platform_state, "llm_client", lambda: client)
    at = start("full-history")
    shown = transcript(at)
    assert len(shown) == 2 * schedule_len() and all("SECRET-THOUGHT" not in text for _, text in shown)
    assert [e.label for e in at.expander].count("Reasoning (kept apart from the answer)") == 2 * schedule_len()
    assert any("SECRET-THOUGHT" in c.value for c in at.code)
    captions = "\n".join(c.value for c in at.caption)
    assert "Prompt fitted to the context window" in captions and "sessions 1001\\_sample0" in captions


def test_an_opening_the_model_could_not_word_says_it_is_the_user_query(tmp_path, monkeypatch):
    """The opening fell back to the dataset's user query (no draft spoke as the user): the transcript says so."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")

    def greeting_opening(req):
        if side_of(req) == "user" and "The chat has not started" in req.messages[-1].content:
            return "Hello! How can I help you today?"
        return reply(req)

    client = app_workspace().with_config(load_config(secrets={}, env={})).llm(
        providers=dict.fromkeys(ROLES, ScriptedLLM(greeting_opening)))
    monkeypatch.setattr(platform_state, "llm_client", lambda: client)
    sim = app_workspace().open_simulation(load_dataset(DEMO), spec(), client)
    sim.step()
    at = open_page("simulate", run=sim.record.run_id)
    assert not at.exception, [e.value for e in at.exception]
    query = load_dataset(DEMO).users[UID].session(SAMPLE).topics[0].topic.user_query
    assert md_escape(query) in transcript(at)[0][1]
    assert any("Not the model's draft" in c.value and "How can I help" in c.value for c in at.caption)
