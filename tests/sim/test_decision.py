"""Judging turns composed from the user's decision (sim/decision.py), in English and Chinese."""

from __future__ import annotations

from sim.decision import GuessDecision, VerdictDecision, compose
from sim.persona_check import speaks_as_user
from sim.prompting import load_role_prompt
from sim.stance import classify_stance as classify


def test_a_missed_guess_is_denied_in_the_fixed_words_then_the_models_own_clause():
    prompt = load_role_prompt("sim/user_decision", "en")
    text, note = compose(prompt, GuessDecision(guessed=False, point="i want the swap in writing"), "en", [], "Megan")
    assert text == "No, that's not it. I want the swap in writing"
    assert "guessed: no" in note and "kept" in note
    assert classify(text).label == "reject"


def test_a_confirmation_volunteers_nothing_and_an_assistant_clause_is_left_out():
    prompt = load_role_prompt("sim/user_decision", "en")
    text, _ = compose(prompt, GuessDecision(guessed=True, point="I also need a holiday"), "en", [], "Megan")
    assert text == "Yes, that's it." and classify(text).label == "accept"
    text, note = compose(prompt, VerdictDecision(accept=False, why="You could try asking your manager."), "en", [], "M")
    assert text == "No, that's not for me." and "left out" in note and classify(text).label == "reject"


def test_chinese_users_get_chinese_fixed_words_and_an_echo_is_left_out():
    prompt = load_role_prompt("sim/user_decision", "zh")
    text, _ = compose(prompt, VerdictDecision(accept=True, why="我正好想剪个短片"), "zh", [], "程磊")
    assert text == "好，就这么办。我正好想剪个短片" and speaks_as_user(text, "zh").ok
    assert classify(text).label == "accept"
    said = "你是想把驻场谈到不耽误照顾她吧？"
    text, note = compose(prompt, GuessDecision(guessed=False, point=said), "zh", [said], "程磊")
    assert text == "不对，不是这个。" and "left out" in note and classify(text).label == "reject"


def test_under_the_english_wording_a_chinese_user_still_says_the_fixed_words_in_chinese(monkeypatch):
    monkeypatch.setenv("PAL_PROMPT_WORDING", "english")
    prompt = load_role_prompt("sim/user_decision", "zh")
    assert prompt.name == "sim/user_decision"  # the English wording was sent to the model
    said = "你是想把驻场谈到不耽误照顾她吧？"
    text, _ = compose(prompt, GuessDecision(guessed=False, point=said), "zh", [said], "程磊")
    assert text == "不对，不是这个。" and speaks_as_user(text, "zh").ok  # was "No, that's not it."
    text, _ = compose(prompt, VerdictDecision(accept=True, why="我正好想剪个短片"), "zh", [], "程磊")
    assert text == "好，就这么办。我正好想剪个短片"


class _Recorder:
    """A client whose user_simulator window is ``window`` tokens (the estimate counter); it records what it is asked
    and answers a guess decision, or raises ``raises``."""

    def __init__(self, window: int, raises: Exception | None = None):
        self.window, self.raises, self.asked = window, raises, []

    def budget(self, role, max_tokens=None, structured=None):
        from backends.llm.context import Budget
        from backends.llm.counters import EstimateCounter

        return Budget(role, self.window, "test", 64, EstimateCounter())

    def structured(self, role, messages, model, **kw):
        from backends.llm.types import StructuredResult

        if self.raises is not None:
            raise self.raises
        self.asked.append((messages, kw.get("cuts")))
        return StructuredResult[model](value=model(guessed=True, point=""), raw="{}", attempts=1)


def _long_chat(n: int):
    from palset.loader import load_dataset
    from palset.vocab import Act
    from sim.simulator import TopicContext
    from sim.types import Utterance
    from tests.conftest import DEMO

    user = load_dataset(DEMO).users["1000"]
    session = user.session("1000_sample7")
    ctx = TopicContext(user=user, session=session, topic=session.topics[0])
    history = []
    for no in range(1, n + 1):
        history.append(Utterance(turn_no=no, side="user", actor="simulator", act=Act.TOPIC_INQUIRY,
                                 content=f"My rota is a mess again, week {no}, and nobody listens to me. " * 6))
        history.append(Utterance(turn_no=no, side="assistant", actor="assistant", act=Act.REQUIREMENT_PREDICTION,
                                 content=f"Could it be that you need a fair swap for week {no}? " * 6))
    return ctx, history


def test_a_decision_is_fitted_into_the_window_on_its_own_oldest_utterances_first():
    """The decision's part and JSON instructions are longer than the draft's: its chat is cut again to fit (a
    Chinese persona on SmolLM2 overflowed the 4,096-token slot and failed the run)."""
    from palset.vocab import Act
    from sim.decision import decided_turn

    ctx, history = _long_chat(12)
    llm = _Recorder(window=1200)
    turn = decided_turn(llm, load_role_prompt("sim/user_simulator", "en"), ctx, Act.REQUIREMENT_CONFIRMATION,
                        history, "You write the chat messages of the user.", [], "salt")
    assert turn is not None and turn[0].startswith("Yes")
    (messages, cuts), = llm.asked
    text = messages[-1]["content"]
    assert "earlier message(s) left out" in text and "week 12" in text and "week 1," not in text
    assert cuts and cuts[0].what == "dialogue so far" and int(cuts[0].removed[-1]) >= 1
    assert sum(len(m["content"]) for m in messages) < 4 * 1200


def test_a_decision_that_cannot_fit_keeps_the_last_draft():
    from backends.llm.errors import ContextOverflow
    from palset.vocab import Act
    from sim.decision import decided_turn

    ctx, history = _long_chat(2)
    llm = _Recorder(window=1200, raises=ContextOverflow("the prompt takes 4,066 tokens … nothing was sent"))
    assert decided_turn(llm, load_role_prompt("sim/user_simulator", "en"), ctx, Act.SOLUTION_FEEDBACK, history,
                        "system", [], "salt") is None


def test_a_decision_shows_its_fixed_words_as_soon_as_its_value_is_written_then_the_rest():
    """The turn's first words are out a few tokens into the JSON, not when the call is done."""
    from palset.vocab import Act
    from sim.decision import DecisionStream

    prompt = load_role_prompt("sim/user_decision", "en")
    shown: list[str] = []
    stream = DecisionStream(prompt, Act.REQUIREMENT_CONFIRMATION, "en", shown.append)
    for delta in ['{"gue', 'ssed"', ': fa']:
        stream.feed(delta)
        assert shown == []  # "fa…" is not a decision yet
    stream.feed('lse')
    assert shown == ["No, that's not it."]
    stream.feed(', "point": "I want')
    stream.feed(' it in writing"}')
    assert shown == ["No, that's not it."]  # shown once
    turn, _ = compose(prompt, GuessDecision(guessed=False, point="I want it in writing"), "en", [], "Megan")
    stream.finish(turn)
    assert "".join(shown) == turn == "No, that's not it. I want it in writing"


def test_a_chinese_users_decision_streams_in_chinese():
    from palset.vocab import Act
    from sim.decision import DecisionStream

    prompt = load_role_prompt("sim/user_decision", "zh")
    shown: list[str] = []
    stream = DecisionStream(prompt, Act.SOLUTION_FEEDBACK, "zh", shown.append)
    stream.feed('{"accept":true,"why":"')
    assert shown == ["好，就这么办。"]
    turn, _ = compose(prompt, VerdictDecision(accept=True, why="我正好想剪个短片"), "zh", [], "程磊")
    stream.finish(turn)
    assert "".join(shown) == turn


def test_a_decision_whose_parse_disagrees_with_what_streamed_adds_nothing_and_is_logged(caplog):
    from palset.vocab import Act
    from sim.decision import DecisionStream

    prompt = load_role_prompt("sim/user_decision", "en")
    shown: list[str] = []
    stream = DecisionStream(prompt, Act.SOLUTION_FEEDBACK, "en", shown.append)
    stream.feed('{"accept": true, "accept": false}')
    stream.finish("No, that's not for me.")
    assert shown == ["Yes, I'll do that."] and "was shown while it streamed" in caplog.text


def test_an_english_clause_ending_in_chinese_is_left_out():
    """"Yes, I'll do that. … about family responsibility and健康." — the 1.5B's clause, composed for user 1003."""
    prompt = load_role_prompt("sim/user_decision", "en")
    assert compose(prompt, VerdictDecision(accept=True, why="it fits my values about family health"), "en", [],
                   "Chris")[0] == "Yes, I'll do that. It fits my values about family health"
    text, note = compose(prompt, VerdictDecision(accept=True, why="it fits my values about family responsibility and健康"),
                         "en", [], "Chris")
    assert text == "Yes, I'll do that." and "its words left out" in note


def test_no_english_turn_of_the_dataset_holds_a_chinese_character(demo_dataset):
    from sim.persona_check import stray_chinese

    turns = [x.content for u in demo_dataset.users.values() if u.language == "en" for s in u.sessions
             for t in s.turns for x in (t.user, t.assistant)]
    assert len(turns) > 1000 and not [t for t in turns if stray_chinese(t, "en")]
    assert stray_chinese("It will also help my班", "en") and not stray_chinese("我建议你先和刘梅谈", "zh")
