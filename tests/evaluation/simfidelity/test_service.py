"""Checking stored runs against the demo dataset's gold (service): every simulated user turn checked, turns a person
typed left out, "n/a — no gold" with the reason, per-check availability, the stored result reused until the run
grows, the judge classifier through the judge role, and the dataset's own dialogues as runs."""

import json

import pytest

from backends.config import ROLES
from backends.embeddings import HashEmbedder
from backends.llm.fake import ScriptedLLM
from evaluation.simfidelity.service import check_run, matchers, measure_run, own_dialogue_runs, simulator_model
from evaluation.simfidelity.types import NO_GOLD, SimFidelityConfig
from palset.dataset import dataset_key
from palset.loader import load_dataset
from palset.vocab import Act
from sim.reference import topic_turns
from sim.textstats import features
from sim.types import RunRecord, RunSpec, Utterance
from tests.conftest import DEMO

USER, SAMPLE, TOPIC = "1000", "1000_sample7", "topic-1"


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


@pytest.fixture
def mf():
    emb = HashEmbedder()
    return matchers(lambda _language: emb)


def record(demo, turns, **spec_kw) -> RunRecord:
    spec = RunSpec(dataset=dataset_key(demo.root), user_id=USER, sample_id=SAMPLE, topic_key=TOPIC, method="vanilla",
                   **spec_kw)
    schedule = [(Act.TOPIC_INQUIRY, Act.REQUIREMENT_PREDICTION), (Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_PROPOSAL),
                (Act.SOLUTION_FEEDBACK, Act.FEEDBACK_RESPONSE)]
    utts = [Utterance(turn_no=i // 2 + 1, side=side, actor=actor, act=act, content=text)
            for i, (side, actor, act, text) in enumerate(turns)]
    return RunRecord(run_id="run-test", spec=spec, status="finished", schedule=schedule if spec.mode == "fixed" else [],
                     utterances=utts, settings={"user_simulator": {"model": "tiny-model"}})


def turns(demo):
    topic = next(t for t in demo.users[USER].session(SAMPLE).topics if t.key == TOPIC).topic
    pos = next(c.solution for c in topic.candidate_solutions if c.feedback == "pos")
    return [("user", "simulator", Act.TOPIC_INQUIRY, topic.user_query),
            ("assistant", "assistant", Act.REQUIREMENT_PREDICTION, topic.implicit_needs[0]),
            ("user", "human", Act.REQUIREMENT_CONFIRMATION, "typed by a person"),
            ("assistant", "assistant", Act.SOLUTION_PROPOSAL, pos),
            ("user", "simulator", Act.SOLUTION_FEEDBACK, "That sounds great, I'll do that."),
            ("assistant", "assistant", Act.FEEDBACK_RESPONSE, "Good luck.")]


def test_every_simulated_turn_is_checked_against_the_topics_gold(demo, mf):
    result = check_run(record(demo, turns(demo)), demo, mf)
    assert result.no_gold is None and [t.turn_no for t in result.turns] == [1, 3]  # the person's turn is left out
    first, feedback = result.turns
    assert {c.check for c in first.checks} == {"vague", "persona", "act"}
    assert feedback.get("verdict").outcome == "pass" and feedback.get("verdict").evidence["label"] == "pos"
    assert result.figures["acceptance_rate"] == 1.0 and result.figures["implied_acceptance"] == 1.0
    assert result.figures["over_cooperation"] == 0.0 and result.counts["verdict_matched"] == 1
    assert result.simulator == "llm" and result.simulator_model == "tiny-model" and result.embedder == "hash"
    own = topic_turns(demo.users[USER].session(SAMPLE), TOPIC)
    assert result.reference == [features(t.user.content) for t in own] and len(result.reference) == len(own)
    assert result.key.startswith("simfid-run-test-") and result.seconds >= 0


def test_a_run_without_gold_gets_na_never_a_figure(demo, mf):
    other = record(demo, turns(demo))
    other.spec = other.spec.model_copy(update={"dataset": "/elsewhere"})
    result = check_run(other, demo, mf)
    assert result.no_gold.startswith(NO_GOLD) and "another dataset" in result.no_gold
    assert result.turns == [] and result.figures == {} and result.passed is None
    missing = record(demo, turns(demo))
    missing.spec = missing.spec.model_copy(update={"topic_key": "topic-9"})
    assert "no topic" in check_run(missing, demo, mf).no_gold


def test_free_mode_and_a_typed_opening_lose_only_the_checks_they_cannot_have(demo, mf):
    free = check_run(record(demo, turns(demo), mode="free", free_query="My own words?"), demo, mf)
    assert set(free.unavailable) == {"vague", "act"}
    assert free.turns[0].get("vague").outcome == "n/a" and free.turns[0].get("act").outcome == "n/a"
    assert free.turns[1].get("verdict").outcome == "pass"  # the topic's candidates still carry verdicts


def test_stored_results_are_reused_until_the_run_grows(demo, mf, tmp_path):
    from testkit.workspace import make_workspace

    ws = make_workspace(tmp_path / "pal")
    rec = record(demo, turns(demo)[:2])
    first = measure_run(rec, demo, mf, ws.simfidelity)
    assert ws.simfidelity.get(first.key) == first
    assert measure_run(rec, demo, mf, ws.simfidelity).created_at == first.created_at  # reused
    grown = record(demo, turns(demo))
    second = measure_run(grown, demo, mf, ws.simfidelity)
    assert second.key != first.key and ws.simfidelity.of_run("run-test").key == second.key
    assert [r.key for r in ws.simfidelity.results(dataset_key(demo.root))] == [second.key]


def test_the_judge_classifier_asks_the_judge_role_and_keeps_its_answer(demo, mf, tmp_path):
    from testkit.workspace import make_workspace

    ws = make_workspace(tmp_path / "pal")
    fake = ScriptedLLM(lambda req: json.dumps({"reason": "clearly likes it", "stance": "accept"}))
    llm = ws.llm(providers=dict.fromkeys(ROLES, fake))
    result = check_run(record(demo, turns(demo)), demo, mf, config=SimFidelityConfig(classifier="judge"), llm=llm)
    stance = result.turns[1].get("verdict").evidence["stance"]
    assert stance["classifier"] == "judge" and stance["label"] == "accept" and "clearly likes it" in stance["raw"]
    assert result.judge_model == llm.config.role("judge").model and fake.requests
    with pytest.raises(ValueError, match="judge"):
        check_run(record(demo, turns(demo)), demo, mf, config=SimFidelityConfig(classifier="judge"))


def test_the_datasets_own_dialogues_as_runs(demo, mf):
    runs = own_dialogue_runs(demo, ["1000"])
    assert runs and {r.spec.sample_id for r in runs} == {s.sample_id for s in demo.users["1000"].query}
    assert all(r.utterances[0].act is Act.TOPIC_INQUIRY and r.schedule for r in runs)
    result = check_run(runs[0], demo, mf, label="dataset dialogue")
    assert result.simulator == "dataset dialogue" and result.simulator_model == "dataset dialogue"
    assert result.figures["schedule_adherence"] is not None


def test_the_floors_answer_the_datasets_own_assistant_turns(demo, mf):
    """always-accept and random-verdict replace only the user's side of the dataset's dialogue: the proposals are the
    dataset's, so they match the topic's candidates and the verdict figures have turns to count."""
    replay = {r.spec.topic_key + r.spec.sample_id: r for r in own_dialogue_runs(demo, ["1000", "1006"])}
    floors = {kind: own_dialogue_runs(demo, ["1000", "1006"], simulator=kind) for kind in ("always-accept", "random-verdict")}
    for runs in floors.values():
        assert len(runs) == len(replay)
        for run in runs:
            own = replay[run.spec.topic_key + run.spec.sample_id]
            assert [u.content for u in run.utterances if u.side == "assistant"] == \
                [u.content for u in own.utterances if u.side == "assistant"]
            session = next(s for s in demo.users[run.spec.user_id].query if s.sample_id == run.spec.sample_id)
            topic = next(t for t in session.topics if t.key == run.spec.topic_key)
            assert run.utterances[0].content == topic.topic.user_query  # the floors open with the topic's query
    accept = [check_run(r, demo, mf, label="always-accept") for r in floors["always-accept"]]
    verdicts = [t.get("verdict") for r in accept for t in r.turns if t.get("verdict") is not None]
    judged = [v for v in verdicts if v.outcome != "n/a"]
    assert judged and all(v.evidence["stance"]["label"] == "accept" for v in judged)
    chance = [check_run(r, demo, mf, label="random-verdict") for r in floors["random-verdict"]]
    labels = {t.get("verdict").evidence["stance"]["label"] for r in chance for t in r.turns
              if t.get("verdict") is not None and t.get("verdict").outcome != "n/a"}
    assert {"accept", "reject"} <= labels  # chance answers both ways, on proposals that match a candidate
    again = own_dialogue_runs(demo, ["1000"], simulator="random-verdict")[0]
    assert [u.content for u in again.utterances] == [u.content for u in floors["random-verdict"][0].utterances]  # seeded
    with pytest.raises(ValueError, match="replay, always-accept, random-verdict"):
        own_dialogue_runs(demo, ["1000"], simulator="llm")


def test_simulator_model_names_the_user_side():
    base = {"dataset": "d", "user_id": "u", "sample_id": "s", "topic_key": "t", "method": "m"}
    llm = RunRecord(run_id="r", spec=RunSpec(**base), settings={"user_simulator": {"model": "qwen"}})
    ref = RunRecord(run_id="r", spec=RunSpec(**base, simulator="always-accept"))
    assert simulator_model(llm) == "qwen" and simulator_model(ref) == "always-accept"


def test_a_run_store_from_before_the_table_has_no_results(tmp_path):
    """A presentation imported by an earlier version is opened read-only, unmigrated: no sim_fidelity table."""
    from backends.store.db import Database
    from evaluation.simfidelity.store import SimFidelityStore

    db = Database(tmp_path / "old.sqlite")
    with db.write() as conn:
        conn.execute("CREATE TABLE other (x)")
    store = SimFidelityStore(db)
    assert store.results("d") == [] and store.of_run("r") is None and store.get("k") is None
