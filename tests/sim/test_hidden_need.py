"""No user turn gives away the need or a solution the assistant is to find out: a draft that mostly copies the
topic's requirement, implicit needs or liked and disliked solutions (together, not only one by one) is asked again,
and a judging turn whose drafts all do is composed from the model's decision, whose own words may not copy it either. The demo data (CC BY-NC, licenses/) is the measure: none of its user turns
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


def _topic():
    return load_dataset(DEMO).users["1000"].session("1000_sample7").topics[0]


def test_two_needs_stitched_into_one_turn_give_the_need_away_though_neither_does_alone():
    """The 1.5B as user 1000 answered a guess with both implicit needs in one sentence: each is under the echo share
    of the turn alone, the two together are over it."""
    from sim.persona_check import echoes
    from sim.prompting import hidden_need

    lock_in, not_bounced = _topic().topic.implicit_needs
    turn = f"I need to {lock_in.lower()} and to {not_bounced.lower()}."
    hidden = hidden_need(_topic())
    assert not echoes(turn, lock_in) and not echoes(turn, not_bounced)
    assert hidden.given_away(turn)
    assert not hidden.given_away("I need someone real to cover that night, and no more surprises from rostering.")


def test_a_liked_or_disliked_solution_is_given_away_but_the_users_reason_is_not():
    """A liked solution written out before the assistant proposed it gives away what the assistant is to find; the
    dataset's reason for liking it is the user's own words (the data's user turns say them) and may be said."""
    from sim.prompting import hidden_need

    (liked, reason), _second = _topic().liked_and_disliked()[0]
    (disliked, _why), _other = _topic().liked_and_disliked()[1]
    hidden = hidden_need(_topic())
    assert hidden.given_away(f"I'd rather {liked[0].lower()}{liked[1:]}")
    assert hidden.given_away(f"Maybe I should {disliked[0].lower()}{disliked[1:]}")
    assert not hidden.given_away(reason)


def test_no_user_turn_of_the_demo_data_gives_its_sessions_need_away(demo_dataset):
    """Every user turn of the demo data's 862, against every topic of its session (turns are not mapped to topics
    here): none mostly copies its requirement, implicit needs or liked and disliked solutions — so asking such a
    turn again asks only what PAL-Set's users never do. The requirement itself, said as a later turn, does."""
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
