"""The opening of a simulated dialogue: the User-LLM's first turn speaks as the user, asks the question on the
user's mind without giving away the need the assistant is to find out, and falls back to the dataset's user query
(saying why) when no draft will do — never a failed run."""

from palset.loader import load_dataset
from tests.conftest import DEMO
from tests.sim.conftest import default_reply, finished_run, side_of


def test_an_opening_that_never_speaks_as_the_user_becomes_the_user_query(sim_env):
    """A small model's opening that apologises or greets like an assistant three times is replaced by the question
    on the user's mind as the dataset states it; the utterance says why and keeps the last draft."""
    from sim.persona_check import speaks_as_user

    drafts = []

    def reply(req):
        if side_of(req) == "user" and "The chat has not started" in req.messages[-1].content:
            drafts.append(req)
            return "I'm sorry, I don't understand the chat. Could you please rephrase your message?"
        return default_reply(req)

    record, topic = finished_run(sim_env, reply)
    first = record.utterances[0]
    assert len(drafts) == 3 and first.attempts == 3  # asked again twice, each time told why
    assert "not usable" in drafts[-1].messages[-1].content and "rephrase" not in drafts[-1].messages[-1].content
    assert first.content == topic.topic.user_query and speaks_as_user(first.content, "en").ok
    assert first.fallback.startswith("the user query") and "rephrase" in first.fallback
    later = [u for u in record.utterances if u.side == "user" and u.turn_no > 1]
    assert later and all(not u.fallback for u in later)  # only the opening falls back


def test_an_opening_that_gives_the_need_away_is_asked_again_then_becomes_the_user_query(sim_env):
    """The 1.5B as user 1006 once opened with the topic's requirement word for word: the assistant had nothing left
    to find out. Such a draft is asked again with the reason; a later draft in the user's own words is kept, and
    three that give the need away send the user query (the utterance says why)."""
    from sim.decision import GAVE_AWAY
    from sim.persona_check import GIVES_AWAY

    demo = load_dataset(DEMO)
    need = demo.users["1000"].session("1000_sample7").topics[0].topic.implicit_needs[0]
    drafts = []

    def reply(req, own_words_at=2):
        if side_of(req) == "user" and "The chat has not started" in req.messages[-1].content:
            drafts.append(req)
            return "So, any thoughts on my week?" if len(drafts) == own_words_at else f"I need this: {need}"
        return default_reply(req)

    record, _ = finished_run(sim_env, reply)
    first = record.utterances[0]
    assert (len(drafts), first.attempts, first.content, first.fallback) == (2, 2, "So, any thoughts on my week?", "")
    assert GIVES_AWAY in drafts[1].messages[-1].content  # the retry note names the reason
    drafts.clear()
    record, topic = finished_run(sim_env, lambda req: reply(req, own_words_at=0), seed="away")
    first = record.utterances[0]
    assert len(drafts) == 3 and first.content == topic.topic.user_query and GAVE_AWAY in first.fallback


def test_an_opening_with_no_usable_draft_at_all_is_the_user_query_not_a_failed_run(sim_env):
    """Free mode: every try of the opening is broken JSON (what SmolLM2 did once its narrations were rejected)."""

    def reply(req):
        if side_of(req) == "user" and any("The chat has not started" in m.content for m in req.messages):
            return "The user had a choice to"  # neither JSON nor the user speaking
        return default_reply(req)

    record, topic = finished_run(sim_env, reply, mode="free", max_turns=2)
    first = record.utterances[0]
    assert first.content == topic.topic.user_query
    assert first.fallback.startswith("the user query")
