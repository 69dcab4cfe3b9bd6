"""Small text helpers of the dialogue roles (sim/roles.py)."""

from __future__ import annotations

from sim.roles import clean, usable


def test_a_label_the_model_wrote_before_the_words_is_stripped_and_a_bare_label_is_not_a_turn():
    assert clean("Reply: Yes, that's the one.") == "Yes, that's the one."
    assert clean("回复：对，就是这个。") == "对，就是这个。"
    assert clean("我：“请问年终要给一个店长打低分，这话怎么开口？") == "请问年终要给一个店长打低分，这话怎么开口？"  # the 0.5B, 1006
    assert clean("Me: Can we swap the shift?") == "Can we swap the shift?"
    assert not usable(clean("回复："))  # what the 0.5B model sent as a verdict once
    assert clean("Reply to Aisha first, then Loop.") == "Reply to Aisha first, then Loop."  # a verb, not a label
