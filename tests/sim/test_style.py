"""The user_style option (sim.style): profile and message style from the user's own turns of earlier sessions only,
the versioned fragment, and where it goes into the User-LLM's messages (recorded on the run)."""

import pytest

from backends.prompts import load_prompt
from palset.loader import load_dataset
from palset.vocab import Act
from sim.service import make_spec
from sim.style import earlier_turns, style_fragment, style_profile
from tests.conftest import DEMO


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


def test_only_sessions_before_the_simulated_one_are_read(demo):
    user = demo.users["1000"]
    session = user.sessions[3]
    turns = earlier_turns(user, session)
    expected = [t.user.content for s in user.sessions[:3] for t in s.turns]
    assert [text for _, text in turns] == expected
    assert earlier_turns(user, user.sessions[0]) == []


def test_profile_figures_are_computed_from_the_turns():
    turns = [(Act.TOPIC_INQUIRY, "How do I sleep after nights?"), (Act.REQUIREMENT_CONFIRMATION, "Yes, exactly."),
             (Act.SOLUTION_FEEDBACK, "No, that's too expensive for me."), (Act.SOLUTION_FEEDBACK, "I like it.")]
    p = style_profile(turns, "en")
    assert p.turns == 4 and p.questions == 0.25 and p.first_person == 0.75
    assert p.confirmations == {"accept": 1} and p.verdicts == {"reject": 1, "accept": 1}
    assert [a for a, _ in p.examples] == ["Solution Feedback", "Requirement Confirmation", "Topic Inquiry"]
    fragment = style_fragment(p)
    assert "accepted 1, rejected 1" in fragment and "25%" in fragment and "I like it." in fragment
    assert "No earlier conversation" in style_fragment(style_profile([], "en"))


def test_a_styled_run_sends_the_fragment_and_records_it(demo, sim_env):
    make_llm, _store = sim_env
    llm, fake = make_llm()
    spec = make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla", user_style=True)
    record = make_llm.ws.open_simulation(demo, spec, llm).run()
    assert record.status == "finished"
    version = load_prompt("sim/user_style").version
    assert record.settings["user_simulator"]["user_style"] == {"prompt": "sim/user_style", "version": version,
                                                               "earlier_turns": len(earlier_turns(
                                                                   demo.users["1000"], demo.users["1000"].session(
                                                                       "1000_sample7")))}
    sim_requests = [r for r in fake.requests if any("You write the chat messages that" in m.content
                                                    for m in r.messages)]
    assert sim_requests and all(r.messages[0].role == "system" and "How this user talks to the assistant"
                                in r.messages[0].content for r in sim_requests)
    first_user = next(u for u in record.utterances if u.side == "user")
    assert first_user.prompt.startswith("[system]\nYou write the chat messages") and "# How this user talks" in first_user.prompt


def test_without_the_option_the_simulator_prompt_is_unchanged(demo, sim_env):
    make_llm, _store = sim_env
    llm, fake = make_llm()
    record = make_llm.ws.open_simulation(demo, make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla"), llm).run()
    assert "user_style" not in record.settings["user_simulator"]
    assert fake.requests and not any("How this user talks to the assistant" in m.content for r in fake.requests
                                     for m in r.messages)
