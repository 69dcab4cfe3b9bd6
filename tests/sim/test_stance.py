"""The rule-based stance classifier (sim.stance): each label in English and Chinese, the masked forms, the leading
clause, echo questions, questions as no verdict, replies to a guess — and its accuracy on real PAL-Set verdicts
(Mem-PAL's example dialogue, ../shared/data, CC BY-NC 4.0) and on the demo users' own verdicts."""

import pytest

from sim.stance import classify_stance
from tests.conftest import PALSET, require_shared


@pytest.mark.parametrize("text, label", [
    ("Yes, exactly.", "accept"),
    ("That sounds great, I'll do that.", "accept"),
    ("Not bad at all, I'll book it tonight.", "accept"),
    ("No, that doesn't suit me at all.", "reject"),
    ("That's not what I need.", "reject"),
    ("Absolutely not. Nobody is touching my neck.", "reject"),
    ("That sounds good, but it's too expensive.", "partial"),
    ("Maybe, but I'm not sure it fits me.", "partial"),
    ("How would that work for me in practice?", "none"),
    ("Won't customers think I'm lazy?", "none"),  # an objection asked, no verdict
    ("An app? My customers are plumbers. Nobody downloads those.", "reject"),  # opening echo question
    ("That I like. He'll probably say no the first time, but it's his choice.", "accept"),  # reported "no"
    ("这个主意不错，至少比写信强多了，我可以试试看。", "accept"),
    ("不行，我觉得这完全没用，甚至可能让她觉得我在敷衍。", "reject"),
    ("野餐准备起来太麻烦了，而且半天对我来说还是有点长。", "reject"),  # 对我来说 is no "对"
    ("也许吧，但我不确定合不合适。", "partial"),  # 合不合适 asks, it does not refuse
    ("这个具体要怎么做呢？", "none"),
    ("住他那儿？作业没人管、游戏随便打，想都别想。", "reject"),
    ("这个好，今晚就弄。", "accept"),
])
def test_labels_in_both_languages(text, label):
    assert classify_stance(text).label == label, classify_stance(text).cues


@pytest.mark.parametrize("text, label", [
    # verdicts the recorded demo runs' simulated user (Qwen2.5-Coder-1.5B) gave that the lexicon read as no stance
    # or the wrong one: plain acceptance, "might help", "I don't think …" rejections
    ("I accept the suggestion to consult with my doctor and adjust my medication regimen.", "accept"),
    ("I think the Dexcom Stelo might help me keep my A1c under 7 by March.", "accept"),
    ("I don't think that is a proper solution for my needs. Let's look at the other options together.", "reject"),
    ("I don't think that's a good idea. Maybe we could set up video calls instead.", "reject"),
    ("I completely understand and will try the suggested things next weekend.", "accept"),
    ("明白了，我们会尽快安排一次家庭会议来讨论这些需求。", "accept"),
    ("I don't accept that.", "reject"),
    ("I can't accept this plan.", "reject"),
    # a statement before the question in one sentence keeps its verdict; the question alone still has none
    ("I agree with this option, but do you have any idea where I can find such properties?", "accept"),
    ("If I did that, would my boss even notice?", "none"),
])
def test_plain_verdicts_of_a_simulated_user(text, label):
    assert classify_stance(text).label == label, classify_stance(text).cues


def test_language_is_read_from_the_script_or_given():
    assert classify_stance("不行").label == "reject"
    assert classify_stance("不行", "zh").label == classify_stance("不行", None).label
    assert classify_stance("No.", "en").label == "reject"


def test_a_reply_to_a_guess_confirms_in_more_ways():
    assert classify_stance("That's the thing. I am awake all day after nights.").label == "none"
    assert classify_stance("That's the thing. I am awake all day after nights.", answering="guess").label == "accept"
    assert classify_stance("是，年年这样吵我受不了。", answering="guess").label == "accept"
    # "不对" / "不是这个" deny the guess: their "对，" and "是这个" are no confirmation (the composed "不对，不是这个。")
    assert classify_stance("不对，不是这个。", answering="guess").label == "reject"
    assert classify_stance("对，就是这个。", answering="guess").label == "accept"
    assert classify_stance("No, it's my back that worries me.", answering="guess").label == "reject"


def test_cues_are_kept_as_evidence():
    result = classify_stance("Sounds good, but it's too far.")
    assert result.evidence() == {"label": "partial", "cues": {"accept": ["Sounds good"], "reject": ["too far"],
                                                              "contrast": ["but"]}}


def test_real_palset_verdicts_are_all_classified_right():
    """Mem-PAL's example history dialogue: every Solution Feedback turn references the framework solution it answers,
    whose pos/neg label the file gives (8 turns, Chinese)."""
    from evaluation.simfidelity.validation import example_items, validate

    require_shared(PALSET / "examples.json")
    items = example_items(PALSET / "examples.json")
    report = validate(items, lambda _a, text, lang: classify_stance(text, lang).label)
    assert report["n"] == 8 and {i["gold"] for i in items} == {"accept", "reject"}
    assert report["accuracy"] == 1.0, report["misses"]
