"""Reference simulators (sim.reference) and the simulator options of a run spec: the dataset's dialogue split into
its topics, replay, always-accept and random-verdict as real user sides of a run, and run ids that do not move."""

import pytest

from palset.loader import load_dataset
from palset.vocab import Act
from sim.reference import PHRASES, RandomVerdictSimulator, topic_turns
from sim.service import SimulationSetupError, make_spec
from sim.store import run_id_for
from sim.types import RunSpec, parse_variant
from tests.conftest import DEMO

SAMPLE, TOPIC = "1000_sample7", "topic-1"


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


def test_a_sessions_dialogue_splits_into_its_topics(demo):
    session = demo.users["1000"].session(SAMPLE)
    parts = [topic_turns(session, t.key) for t in session.topics]
    assert all(p and p[0].user.action is Act.TOPIC_INQUIRY for p in parts)
    assert sum(len(p) for p in parts) == len(session.turns)
    assert [t for p in parts for t in p] == session.turns
    assert topic_turns(session, "topic-9") is None
    broken = session.model_copy(update={"turns": session.turns[1:]})  # the first opening is missing
    assert topic_turns(broken, TOPIC) is None


def test_new_simulator_options_at_their_defaults_keep_old_run_ids(demo):
    spec = make_spec(demo, "1000", SAMPLE, TOPIC, "vanilla")
    assert set(spec.model_dump()) - set(spec.identity()) == {"simulator", "user_style"}
    other = make_spec(demo, "1000", SAMPLE, TOPIC, "vanilla", simulator="always-accept")
    styled = make_spec(demo, "1000", SAMPLE, TOPIC, "vanilla", user_style=True)
    assert len({run_id_for(spec), run_id_for(other), run_id_for(styled)}) == 3


def test_spec_rejects_options_that_cannot_work():
    base = {"dataset": "d", "user_id": "u", "sample_id": "s", "topic_key": "t", "method": "m"}
    with pytest.raises(ValueError, match="replay"):
        RunSpec(**base, simulator="replay", mode="free")
    with pytest.raises(ValueError, match="user_style"):
        RunSpec(**base, simulator="always-accept", user_style=True)
    assert parse_variant("llm+style") == ("llm", True) and parse_variant("replay") == ("replay", False)
    for bad in ("gpt", "replay+style", "llm+fast"):
        with pytest.raises(ValueError, match="unknown simulator"):
            parse_variant(bad)


def run(demo, sim_env, simulator, user="1000", sample=SAMPLE, topic=TOPIC, **kw):
    make_llm, _store = sim_env
    llm, fake = make_llm()
    spec = make_spec(demo, user, sample, topic, "vanilla", simulator=simulator, **kw)
    sim = make_llm.ws.open_simulation(demo, spec, llm)
    return sim.run(), fake


def test_replay_plays_the_datasets_own_user_turns_in_its_act_order(demo, sim_env):
    record, fake = run(demo, sim_env, "replay")
    own = topic_turns(demo.users["1000"].session(SAMPLE), TOPIC)
    assert record.status == "finished" and "replay" in record.schedule_source
    assert record.schedule == [(t.user.action, t.assistant.action) for t in own]
    assert [u.content for u in record.utterances if u.side == "user"] == [t.user.content for t in own]
    assert all(u.actor == "simulator" and u.model == "replay" for u in record.utterances if u.side == "user")
    assert record.settings["user_simulator"] == {"simulator": "replay", "provider": "reference", "model": "replay"}
    assert not any("You write the chat messages that" in m.content for r in fake.requests for m in r.messages)


def test_always_accept_opens_with_the_query_and_agrees_to_everything(demo, sim_env):
    record, _ = run(demo, sim_env, "always-accept")
    users = [u for u in record.utterances if u.side == "user"]
    topic = next(t for t in demo.users["1000"].session(SAMPLE).topics if t.key == TOPIC)
    assert users[0].content == topic.topic.user_query
    assert {u.content for u in users if u.act is Act.SOLUTION_FEEDBACK} == {PHRASES["en"]["accept"]}
    assert {u.content for u in users if u.act is Act.REQUIREMENT_CONFIRMATION} == {PHRASES["en"]["confirm"]}


def test_always_accept_speaks_the_users_language(demo, sim_env):
    session = demo.users["1006"].query[0]
    record, _ = run(demo, sim_env, "always-accept", user="1006", sample=session.sample_id, topic=session.topics[0].key)
    feedback = [u.content for u in record.utterances if u.act is Act.SOLUTION_FEEDBACK]
    assert feedback and set(feedback) == {PHRASES["zh"]["accept"]}


def test_random_verdicts_are_seeded_and_use_every_verdict():
    sim = RandomVerdictSimulator("q?", "en", seed="3")
    picks = [sim.choice(Act.SOLUTION_FEEDBACK, f"run/{i}/user") for i in range(60)]
    assert set(picks) == {"accept", "reject", "partial"}
    assert picks == [RandomVerdictSimulator("q?", "en", seed="3").choice(Act.SOLUTION_FEEDBACK, f"run/{i}/user")
                     for i in range(60)]
    assert picks != [RandomVerdictSimulator("q?", "en", seed="4").choice(Act.SOLUTION_FEEDBACK, f"run/{i}/user")
                     for i in range(60)]
    assert {sim.choice(Act.REQUIREMENT_CONFIRMATION, f"r/{i}") for i in range(40)} == {"confirm", "deny"}


def test_replay_of_a_topic_whose_dialogue_does_not_split_is_a_setup_error(demo, sim_env, monkeypatch):
    import sim.service

    monkeypatch.setattr(sim.service, "topic_turns", lambda *_a: None)
    with pytest.raises(SimulationSetupError, match="nothing to replay"):
        run(demo, sim_env, "replay")


def test_the_markdown_export_names_a_reference_simulator(demo, sim_env):
    from sim.export import run_to_markdown

    record, _ = run(demo, sim_env, "random-verdict")
    text = run_to_markdown(record)
    assert "- Simulated user: random-verdict" in text and "- user_simulator: reference · random-verdict" in text
