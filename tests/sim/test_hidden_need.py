"""No user turn gives away the need the assistant is to find out: a draft that mostly copies the topic's requirement
or an implicit need is asked again, and a judging turn whose drafts all do is composed from the model's decision,
whose own words may not copy it either. The demo data (CC BY-NC, licenses/) is the measure: none of its user turns
does it."""

import json

from palset.loader import load_dataset
from palset.vocab import Act
from testkit.requests import act_of
from tests.conftest import DEMO
from tests.sim.conftest import default_reply, finished_run, side_of


def _need() -> str:
    """User 1000's requirement as the user would say it: "I want to turn Aisha's offer into an approved swap…"."""
    requirement = load_dataset(DEMO).users["1000"].session("1000_sample7").topics[0].topic.requirement
    return requirement.replace("The user wants", "I want", 1)


def _confirmations(record):
    return [u for u in record.utterances if u.side == "user" and u.act == Act.REQUIREMENT_CONFIRMATION]


def _run(sim_env, draft, decision=None):
    """User 1000's first query topic; ``draft(n)`` words the run's n-th Requirement Confirmation draft (from 1,
    counted over the run), ``decision`` answers the decision call; every request of the confirmation drafts is kept."""
    drafts: list = []

    def reply(req):
        last = req.messages[-1].content
        if side_of(req) == "user" and "just guessed" in last:
            return json.dumps(decision or {"guessed": True, "point": ""})
        if side_of(req) == "user" and act_of(req) == Act.REQUIREMENT_CONFIRMATION.value:
            drafts.append(req)
            return draft(len(drafts))
        return default_reply(req)

    record, _topic = finished_run(sim_env, reply)
    return record, drafts


def test_a_confirmation_that_copies_the_requirement_is_asked_again_with_the_reason(sim_env):
    """The 1.5B as user 1007 denied a guess with the requirement word for word ("不对，我需要拿下茶屿这份…"): asked
    again, the retry note names why, and the draft in the user's own words is kept."""
    from sim.persona_check import GIVES_AWAY

    need = _need()
    record, drafts = _run(sim_env, lambda n: f"No, {need}" if n == 1 else "No, it is more about money")
    first = _confirmations(record)[0]
    assert (first.content, first.attempts, first.fallback) == ("No, it is more about money", 2, "")
    assert GIVES_AWAY not in drafts[0].messages[-1].content and GIVES_AWAY in drafts[1].messages[-1].content


def test_a_judging_turn_whose_every_draft_gives_the_need_away_is_composed_without_copying_it(sim_env):
    """Three drafts that copy the requirement: the turn is the decision's fixed words, and the model's own clause,
    a piece of the requirement, is left out; the utterance says why."""
    from sim.decision import GAVE_AWAY
    from sim.persona_check import speaks_as_user

    need = _need()
    record, _drafts = _run(sim_env, lambda n: f"No. {need}", {"guessed": False, "point": need[:80]})
    first = _confirmations(record)[0]
    assert first.content == "No, that's not it." and first.attempts == 4 and first.composed
    assert first.fallback.endswith(GAVE_AWAY) and "left out" in first.fallback
    assert speaks_as_user(first.content, "en").ok


def test_a_decision_whose_clause_hints_in_its_own_words_keeps_the_clause(sim_env):
    """The clause is checked against the need, not dropped: a hint in the user's own words stays."""
    need = _need()
    record, _drafts = _run(sim_env, lambda n: f"No. {need}", {"guessed": False, "point": "it is about my brother"})
    assert _confirmations(record)[0].content == "No, that's not it. It is about my brother"


def test_no_user_turn_of_the_demo_data_gives_its_sessions_need_away(demo_dataset):
    """Every user turn of the demo data's 862, against every topic of its session (turns are not mapped to topics
    here): none mostly copies a requirement or an implicit need — so asking such a turn again asks only what
    PAL-Set's users never do. The requirement itself, said as a later turn, does."""
    from sim.prompting import hidden_need

    turns = 0
    for user in demo_dataset.users.values():
        for session in user.sessions:
            hidden = [hidden_need(topic) for topic in session.topics]
            for turn in session.turns:
                assert not any(h.given_away(turn.user.content) for h in hidden), turn.user.content
                turns += 1
            assert all(h.given_away(h.texts[0]) for h in hidden)
    assert turns == 862
