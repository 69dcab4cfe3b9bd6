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
