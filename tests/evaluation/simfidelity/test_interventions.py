"""Simulator fidelity three ways (on what was kept, on the model's first drafts, beside the interventions) and the
stance of a decided turn taken from its decision, with the text reading against it as the "decision" check."""

from __future__ import annotations

import pytest

from backends.embeddings import HashEmbedder
from evaluation.simfidelity.aggregate import leaderboard
from evaluation.simfidelity.export import board_text
from evaluation.simfidelity.service import check_run, matchers
from evaluation.simfidelity.types import RunFidelity
from palset.dataset import dataset_key
from palset.loader import load_dataset
from palset.vocab import Act
from sim.decision import VerdictDecision, composed
from sim.prompting import load_role_prompt
from sim.types import Draft, RunRecord, RunSpec, Utterance
from tests.conftest import DEMO

USER, SAMPLE, TOPIC = "1000", "1000_sample7", "topic-1"
ASSISTANT_LIKE = "How can I help you with your rota today?"
LLM_PROMPT = "sim/user_simulator"  # a User-LLM turn's prompt name, as the simulator stores it


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


@pytest.fixture
def mf():
    emb = HashEmbedder()
    return matchers(lambda _language: emb)


def _topic(demo):
    return next(t for t in demo.users[USER].session(SAMPLE).topics if t.key == TOPIC).topic


def _run(demo, feedback: Utterance, discussion: Utterance | None = None) -> RunRecord:
    topic = _topic(demo)
    neg = next(c.solution for c in topic.candidate_solutions if c.feedback == "neg")
    spec = RunSpec(dataset=dataset_key(demo.root), user_id=USER, sample_id=SAMPLE, topic_key=TOPIC, method="vanilla")
    discussion = discussion or Utterance(turn_no=2, side="user", actor="simulator", act=Act.SOLUTION_DISCUSSION,
                                         content="Would that work with my shifts?", prompt_name=LLM_PROMPT)
    utts = [Utterance(turn_no=1, side="user", actor="simulator", act=Act.TOPIC_INQUIRY, content=topic.user_query,
                      prompt_name=LLM_PROMPT),
            Utterance(turn_no=1, side="assistant", actor="assistant", act=Act.SOLUTION_PROPOSAL, content=neg),
            discussion,
            Utterance(turn_no=2, side="assistant", actor="assistant", act=Act.SOLUTION_PROPOSAL, content=neg),
            feedback,
            Utterance(turn_no=3, side="assistant", actor="assistant", act=Act.FEEDBACK_RESPONSE, content="Good luck.")]
    schedule = [(Act.TOPIC_INQUIRY, Act.SOLUTION_PROPOSAL), (Act.SOLUTION_DISCUSSION, Act.SOLUTION_PROPOSAL),
                (Act.SOLUTION_FEEDBACK, Act.FEEDBACK_RESPONSE)]
    return RunRecord(run_id="run-interventions", spec=spec, status="finished", schedule=schedule, utterances=utts,
                     settings={"user_simulator": {"model": "tiny-model"}})


def _composed_feedback(accept: bool, words: str | None = None) -> Utterance:
    prompt = load_role_prompt("sim/user_decision", "en")
    text, fallback, decision = composed(prompt, VerdictDecision(accept=accept, why=""), "en", [], "Megan")
    return Utterance(turn_no=3, side="user", actor="simulator", act=Act.SOLUTION_FEEDBACK, content=words or text,
                     prompt_name=LLM_PROMPT, fallback=fallback, decision=decision, attempts=4, drafts_kept=True,
                     drafts=[Draft(text=ASSISTANT_LIKE, reasons=["offers help like an assistant"])] * 3)


def test_a_decided_turns_stance_is_its_decision_and_the_text_reading_is_checked_against_it(demo, mf):
    """The verdict reads the decision (reject, on a disliked candidate: consistent) even where the words would read
    otherwise; the "decision" check reports whether the classifier reads the words as the decision."""
    agreeing = check_run(_run(demo, _composed_feedback(False)), demo, mf).turn(3)
    assert agreeing.get("verdict").evidence["stance"]["source"] == "decision"
    assert agreeing.get("verdict").outcome == "pass" and agreeing.get("decision").outcome == "pass"
    contrary = check_run(_run(demo, _composed_feedback(False, words="That sounds great, I'll do that.")), demo, mf)
    turn = contrary.turn(3)
    assert turn.get("verdict").outcome == "pass"  # the decision, not the words, is the stance
    assert turn.get("decision").outcome == "fail" and turn.get("decision").evidence["text_reading"]["label"] == "accept"
    assert contrary.figures["decision_agreement"] == 0.0
    plain = check_run(_run(demo, Utterance(turn_no=3, side="user", actor="simulator", act=Act.SOLUTION_FEEDBACK,
                                           content="No, that doesn't suit me at all.")), demo, mf).turn(3)
    assert plain.get("decision") is None and "source" not in plain.get("verdict").evidence["stance"]  # nobody decided


def test_a_stored_composed_turn_is_judged_from_the_decision_its_fallback_names(demo, mf):
    feedback = _composed_feedback(False).model_copy(update={"decision": None, "drafts": [], "drafts_kept": False})
    turn = check_run(_run(demo, feedback), demo, mf).turn(3)
    assert turn.get("decision").evidence["derived"] is True and turn.get("verdict").outcome == "pass"


def test_figures_are_reported_on_what_was_kept_on_first_drafts_and_beside_the_interventions(demo, mf):
    """A discussion turn whose assistant-like first draft was sent back: in persona as kept, not as first drafted;
    the composed verdict's first draft (assistant-like) fails persona too. A stored turn asked again keeps no first
    draft: it is left out of the first-draft figures and counted."""
    discussion = Utterance(turn_no=2, side="user", actor="simulator", act=Act.SOLUTION_DISCUSSION,
                           content="Would that work with my shifts?", attempts=2, drafts_kept=True, prompt_name=LLM_PROMPT,
                           drafts=[Draft(text=ASSISTANT_LIKE, reasons=["offers help like an assistant"]),
                                   Draft(text="Would that work with my shifts?", kept=True)])
    result = check_run(_run(demo, _composed_feedback(False), discussion), demo, mf)
    assert len(result.first_drafts) == 3 and result.counts_first["first_draft_unknown"] == 0
    persona_kept = result.turn(2).get("persona").outcome
    first = {t.turn_no: t for t in result.first_drafts}
    assert persona_kept == "pass" and first[2].get("persona").outcome == "fail" and first[2].text == ASSISTANT_LIKE
    assert first[3].get("decision") is None  # a first draft is text nobody structured
    assert result.figures_first["persona_rate"] < result.figures["persona_rate"]
    i = result.interventions
    assert i is not None and (i.user_turns, i.intervened, i.composed, i.drafts_kept) == (3, 2, 1, 2)  # turn 1: plain
    assert i.reasons == {"offers help like an assistant": 4} and i.decisions == {"accept: no": 1}

    stored = discussion.model_copy(update={"drafts": [], "drafts_kept": False})
    stored_feedback = _composed_feedback(False).model_copy(update={"decision": None, "drafts": [],
                                                                   "drafts_kept": False})
    old = check_run(_run(demo, stored_feedback, stored), demo, mf)
    assert len(old.first_drafts) == 1 and old.counts_first["first_draft_unknown"] == 2
    (row,) = leaderboard([old])
    assert row["first_drafts"]["unknown"] == 2 and "before drafts were kept" in row["interventions"]["note"]
    assert row["interventions"]["composed_share"] == pytest.approx(1 / 3)
    text = board_text([row])
    assert " kept " in text and " first " in text and "first draft is not known" in text


def test_a_result_checked_before_interventions_were_measured_stays_readable(demo, mf):
    data = check_run(_run(demo, _composed_feedback(True)), demo, mf).model_dump(mode="json")
    for name in ("first_drafts", "figures_first", "counts_first", "interventions"):
        del data[name]
    for turn in data["turns"]:
        turn["checks"] = [c for c in turn["checks"] if c["check"] != "decision"]
    old = RunFidelity.model_validate({**data, "checks_version": "5"})
    (row,) = leaderboard([old])
    assert row["interventions"]["unmeasured"] == 1 and "check again" in row["interventions"]["note"]
    assert row["checks_versions"] == ["5"] and row["first_drafts"]["turns"] == 0
