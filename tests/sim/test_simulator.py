"""Small text helpers of the dialogue roles (sim/simulator.py)."""

from __future__ import annotations

from sim.simulator import clean, usable


def test_a_label_the_model_wrote_before_the_words_is_stripped_and_a_bare_label_is_not_a_turn():
    assert clean("Reply: Yes, that's the one.") == "Yes, that's the one."
    assert clean("回复：对，就是这个。") == "对，就是这个。"
    assert clean("我：“请问年终要给一个店长打低分，这话怎么开口？") == "请问年终要给一个店长打低分，这话怎么开口？"  # the 0.5B, 1006
    assert clean("Me: Can we swap the shift?") == "Can we swap the shift?"
    assert not usable(clean("回复："))  # what the 0.5B model sent as a verdict once
    assert clean("Reply to Aisha first, then Loop.") == "Reply to Aisha first, then Loop."  # a verb, not a label


def test_a_draft_that_has_gone_astray_for_good_is_stopped_while_it_streams(sim_env):
    """A User-LLM draft that narrates "the user" or offers help like an assistant cannot become
    the user's words however it goes on, so its stream is stopped there (the server stops decoding) and the draft
    is asked again; the last draft, which is kept whatever it is, is read to its end."""
    from backends.config import ROLES
    from backends.llm.fake import ScriptedLLM
    from palset.loader import load_dataset
    from sim.service import make_spec
    from tests.conftest import DEMO
    from tests.sim.conftest import default_reply, side_of

    tail = " ".join(["and", "then", "some", "more", "words"] * 8)

    class Counting(ScriptedLLM):
        """Notes, per streamed request, its attempt (retry notes in it + 1), how many deltas were read, its side."""

        read: list[list[int]] = []

        def stream(self, req):
            entry = [req.messages[-1].content.count("The last draft was not usable") + 1, 0, side_of(req)]
            self.read.append(entry)
            for piece in super().stream(req):
                if isinstance(piece, str):
                    entry[1] += 1
                yield piece

    def reply(req):
        if side_of(req) == "user" and "The chat has not started" not in req.messages[-1].content:
            return f"The user wants a fair swap {tail}"
        return default_reply(req)

    fake = Counting(reply)
    sim_ws = sim_env[0].ws
    llm = sim_ws.llm(session_id="simtest", providers=dict.fromkeys(ROLES, fake))
    demo = load_dataset(DEMO)
    sim = sim_ws.open_simulation(demo, make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla"), llm)
    for _ in range(4):  # the opening, the assistant, the user's second turn (three drafts), the assistant
        utt = sim.step()
    user_turn = [u for u in sim.record.utterances if u.side == "user"][1]
    assert user_turn.content.startswith("The user wants") or user_turn.composed
    drafts = [(attempt, n) for attempt, n, side in fake.read if side == "user"][1:]  # the second turn's
    assert [attempt for attempt, _ in drafts] == [1, 2, 3] and user_turn.attempts >= 3
    assert all(n <= 3 for _, n in drafts[:2])  # "The ", "user " and one delta more, not 45 words
    assert drafts[2][1] > 40  # the last draft is read whole
    assert utt is not None


def test_a_word_still_being_written_does_not_stop_a_draft(sim_env):
    """"The user" of "The username …" is not narration yet: the text is read up to its last whole word."""
    from palset.loader import load_dataset
    from sim.simulator import TopicContext, UserSimulator
    from tests.conftest import DEMO

    user = load_dataset(DEMO).users["1000"]
    session = user.session("1000_sample7")
    llm, _ = sim_env[0]()
    simulator = UserSimulator(llm, TopicContext(user=user, session=session, topic=session.topics[0]))
    assert not simulator._gone_astray("The user")  # perhaps "The username", perhaps "The user wants"
    assert simulator._gone_astray("The user wants")
    assert simulator._gone_astray("How can I help you")
    assert not simulator._gone_astray("I keep losing my")  # a user's words so far
    assert not simulator._gone_astray("My rota")  # not in the first person yet either: that can change


def test_a_user_turns_token_cap_leaves_room_for_the_longest_turn_of_the_data_twice(demo_user_turns):
    """The cap stops a rambling draft early, never a user's real turn: PAL-Set's own user turns (the demo data,
    English and Chinese) fit in it twice over."""
    from backends.llm.counters import estimate_tokens
    from sim.simulator import USER_TURN_TOKENS

    longest = max(estimate_tokens(text) for text, _ in demo_user_turns)
    assert 30 <= longest and 2 * longest <= USER_TURN_TOKENS <= 3 * longest


def test_the_users_name_as_a_speaker_label_is_stripped_and_does_not_stop_a_draft(sim_env):
    """The transcript labels the user's lines with their name, so a model may begin "Adrian Valenzuela: …" (the 1.5B
    did so in five of user 1005's drafts while recording the demo workspace, each stopped as narration): the label is
    not the user's words, and neither is it narration while it is being written."""
    from palset.loader import load_dataset
    from sim.simulator import TopicContext, UserSimulator
    from tests.conftest import DEMO

    assert clean("Adrian Valenzuela: I need a fair way to pick.", name="Adrian Valenzuela") == "I need a fair way to pick."
    assert clean("罗晓岚：我想先问问怎么开口。", name="罗晓岚") == "我想先问问怎么开口。"
    assert clean("I told Adrian Valenzuela: no.", name="Adrian Valenzuela") == "I told Adrian Valenzuela: no."
    data = load_dataset(DEMO)
    llm, _ = sim_env[0]()
    for uid in ("1000", "1006"):
        user = data.users[uid]
        session = user.query[0]
        simulator = UserSimulator(llm, TopicContext(user=user, session=session, topic=session.topics[0]))
        name = simulator.ctx.name()
        assert not simulator._gone_astray(name)  # its colon may follow
        assert not simulator._gone_astray(f"{name}: I")
        assert simulator._words(f"{name}: I need a plan.") == "I need a plan."
        assert simulator._gone_astray(f"{name} wants a plan")  # the name, then words about the user: narration


def test_a_first_line_about_the_assistant_waits_for_the_next_line(sim_env):
    """A draft that first copies the cue ("The assistant just wrote: …") may go on to the user's words on its next
    line (which ``cut_at_speaker`` keeps), so it is not stopped on that line; narration of the assistant after the
    user's own words is."""
    from palset.loader import load_dataset
    from sim.simulator import TopicContext, UserSimulator
    from tests.conftest import DEMO

    user = load_dataset(DEMO).users["1000"]
    session = user.session("1000_sample7")
    llm, _ = sim_env[0]()
    simulator = UserSimulator(llm, TopicContext(user=user, session=session, topic=session.topics[0]))
    assert not simulator._gone_astray('The assistant just wrote: "Is it the rota?"')
    assert simulator._words('The assistant just wrote: "Is it the rota?"\nYes, the rota.') == "Yes, the rota."
    assert simulator._gone_astray('The assistant just wrote: "Is it the rota?"\nThe assistant keeps asking me')
    assert simulator._gone_astray("Yes. The assistant got it")
