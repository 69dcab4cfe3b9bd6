"""The persona rule: does a simulated user's turn speak as the user (English and Chinese)?"""

import pytest

from sim.persona_check import detect_language, echoes, in_language, repeats_earlier, speaks_as_user


@pytest.mark.parametrize("text", [
    "What do I do now that I didn't get staff?",
    "Yes, exactly — I keep waking up at noon.",
    "No, that's not it.",  # a short reaction needs no first person
    "That works for me.",
    "But how would we fit that into our mornings?",
    "Any ideas for getting a staff promotion next cycle without playing politics?",  # a question of one's own
])
def test_english_user_turns_pass(text):
    verdict = speaks_as_user(text, "en")
    assert verdict.ok, verdict.reasons
    assert verdict.language == "en"


@pytest.mark.parametrize("text", [
    "年终要给一个店长打低分，这话怎么开口？",
    "对，论数字就是她，可她十月刚闹过辞职，我怕她又撂挑子。",
    "不对。",
    "这个可以。",
])
def test_chinese_user_turns_pass(text):
    verdict = speaks_as_user(text, "zh")
    assert verdict.ok, verdict.reasons
    assert verdict.language == "zh"


@pytest.mark.parametrize("text,language,reason", [
    ("Hello! How can I help you today?", "en", "assistant-style greeting or offer"),
    ("Dear assistant,", "en", "only addresses the assistant"),
    ("亲爱的助手：", "zh", "only addresses the assistant"),
    ("我对助手提供的信息表示感谢。请问您最近有什么具体的问题或者需要帮助的地方吗？", "zh", "assistant-style greeting or offer"),
    ("好的，请告诉我你的具体想法或者问题吗？", "zh", "assistant-style greeting or offer"),
    ("你好，你的心里有话想跟我聊聊吗？", "zh", "assistant-style greeting or offer"),
    ("I'm happy to help you plan your week.", "en", "assistant-style greeting or offer"),
    ("Here are some tips for sleeping better after a night shift.", "en", "assistant-style greeting or offer"),
    ("I'm sorry, but I can't assist with that request.", "en", "assistant-style greeting or offer"),
    ("You could try a short walk after dinner every day this week.", "en", "assistant-style greeting or offer"),
    ("The user is asking how to talk to a store manager about a low rating.", "en", 'narrates "the user"'),
    ("Turning committee feedback into a concrete plan for the next promotion cycle with dated steps.", "en",
     "not in the first person"),
    ("你好，我是你的私人助手，有什么可以帮你的吗？", "zh", "assistant-style greeting or offer"),
    ("很高兴为您服务，请问您需要什么帮助？", "zh", "assistant-style greeting or offer"),
    ("建议你先和刘梅一对一面谈，再把规则发给所有店长。", "zh", "assistant-style greeting or offer"),
    ("用户想知道怎么给店长打低分。", "zh", 'narrates "the user"'),
    ("年终绩效需要在强制分布的要求下给出一个有数据支撑的评级并且沟通清楚", "zh", "not in the first person"),
    ("你是想让这个评级有理有据、又别把她再逼走吗？", "zh", "not in the first person"),  # the assistant's guess
    ("Are you looking for a way to turn the feedback into a plan?", "en", "not in the first person"),
    ("需要猜中哪一个隐藏需求？", "zh", "talks about the prompt"),
    # what the 1.5B model wrote as a user's confirmation, recording the demo workspace
    ("Sure, I understand your request! Please provide me with the specific details.", "en",
     "assistant-style greeting or offer"),
    ("I need the details about the user's past requirements for sick days.", "en", 'narrates "the user"'),
    ("我想先看看用户的需求。", "zh", 'narrates "the user"'),
    ("I'm sorry for the disappointment.", "en", "assistant-style greeting or offer"),
    ("Yes, I understand. The user should convert the committee feedback into a dated plan.", "en",
     'narrates "the user"'),
    ("What do you need to turn the committee's feedback into a plan?", "en", "not in the first person"),  # what the 0.5B model asked
    ("Which of my hidden needs did you guess?", "en", "talks about the prompt"),
    # the 1.5B as user 1005, recording the demo workspace
    ("I understand that we need to make a decision about our apartment lease by December 31. The assistant correctly "
     "identified the need for choosing an option that works whether or not he gets the day job.", "en",
     'narrates "the assistant"'),
    ("I see you're looking for a decision on our apartment lease by December 31.", "en",
     "assistant-style greeting or offer"),
    ("助手说得对，我需要先比较两个租房方案。", "zh", 'narrates "the assistant"'),
    ("我明白你在问租约的事。", "zh", "assistant-style greeting or offer"),
    # the 1.5B as user 1006, recording the demo workspace: an opening that asks the assistant for its question,
    # and "the user and her ex-husband" as a confirmation
    ("你好，你是不是有什么问题想问我？", "zh", "assistant-style greeting or offer"),
    ("Hi, do you have any questions for me?", "en", "assistant-style greeting or offer"),
    ("我对，用户和前夫应该在假期结束后达成一份书面的约定。", "zh", 'narrates "the user"'),
    # the 1.5B as user 1003, confirming the assistant's guess and discussing its proposal, in the assistant's words
    ("I understand you need to agree on a post-birth plan for both grandmothers. I can help with that!", "en",
     "assistant-style greeting or offer"),
    ("Sure! I can help you create a shared Google calendar for both grandparents.", "en",
     "assistant-style greeting or offer"),
])
def test_assistant_like_or_narrated_turns_fail_with_their_reason(text, language, reason):
    verdict = speaks_as_user(text, language)
    assert not verdict.ok and reason in verdict.reasons


def test_a_turn_in_the_wrong_language_fails():
    assert speaks_as_user("I need a plan for the review meeting.", "zh").reasons == (
        "not in the user's language (zh; written: en)",)
    verdict = speaks_as_user("我想知道怎么开口。", "en")
    assert not verdict.ok and verdict.language == "zh"
    assert in_language("我想知道 KPI 怎么定。", "zh")  # a Latin acronym in Chinese text is still Chinese
    assert detect_language("") == "" and detect_language("OK I think maybe 好") == "mixed"
    assert in_language("anything", "fr")  # languages the rule does not know are not judged


def test_echoes_of_the_assistant_or_the_prompt_fail():
    said = "Is it the night shifts that leave you too tired to sleep properly?"
    assert echoes("Is it the night shifts that leave you too tired to sleep?", said)
    assert not echoes("Yes, the night shifts wreck my sleep.", said)
    verdict = speaks_as_user("是不是夜班让你一直睡不好？", "zh", sources=["助手：是不是夜班让你一直睡不好？"])
    assert not verdict.ok and "repeats the assistant or the prompt" in verdict.reasons
    assert speaks_as_user("对，我夜班后一直睡不好。", "zh", sources=["是不是夜班让你一直睡不好？"]).ok
    assert not echoes("", said) and not echoes("ok", "")


@pytest.mark.parametrize("text,language", [
    ("I'm sorry, I don't understand the chat. Could you please rephrase your message to me?", "en"),
    ("I'm sorry for misunderstanding earlier. I was looking for an open-ended message.", "en"),
    ("I don't have a specific topic in mind. Can you please provide more context?", "en"),
    ("抱歉，我不太明白你的意思。", "zh"),
    ("抱歉，我无法完成这个请求。", "zh"),  # the 0.5B's opening for user 1006 on the Simulate page
    ("我“很抱歉”，但我无法回答这个问题。", "zh"),  # the 0.5B's kept opening in bench/live_chat.py, user 1006
    ("很抱歉，但是我不能提供这方面的帮助。", "zh"),
    ("好的，请提供对话的内容。", "zh"),  # the 0.5B's kept opening for user 1006 in bench/live_chat.py
    ("I'm sorry, but I can't complete this request.", "en"),
    ("I see what you're asking about. Can you please tell me more about the specific issue you're facing with "
     "darkroom work during December?", "en"),  # the 1.5B as user 1004, recording the demo workspace
    ("请提供更多信息，我才能回答。", "zh"),
])
def test_talk_about_the_chat_itself_is_the_assistant_speaking(text, language):
    """What the 0.5B model wrote as a user's opening in the quality bench: meta-talk, not a user's question."""
    verdict = speaks_as_user(text, language)
    assert not verdict.ok and "assistant-style greeting or offer" in verdict.reasons


def test_the_users_own_full_name_is_narration():
    text = 'Alexandra Kowalski\'s question is "What do I do now that I didn\'t get staff?"'
    assert speaks_as_user(text, "en").ok  # without the name the rule cannot tell
    verdict = speaks_as_user(text, "en", name="Alexandra Kowalski")
    assert not verdict.ok and 'narrates "the user"' in verdict.reasons
    assert not speaks_as_user("罗晓岚想知道怎么开口。", "zh", name="罗晓岚").ok
    assert speaks_as_user("I asked Alexandra about it.", "en", name="Alexandra Kowalski").ok  # a first name alone


def test_lasting_reasons_are_those_no_later_words_undo():
    from sim.persona_check import lasting_reasons

    assert lasting_reasons("How can I help you") == ["assistant-style greeting or offer"]
    assert lasting_reasons("The user wants a swap") == ['narrates "the user"']
    assert lasting_reasons("Megan Li wants", name="Megan Li") == ['narrates "the user"']
    assert lasting_reasons("My hidden need is") == ["talks about the prompt"]
    assert lasting_reasons("Rota") == []  # no first person yet, but the next words may bring it
    assert lasting_reasons("你好，我是您的助手") == ["assistant-style greeting or offer"]
    assert lasting_reasons("Yes. The assistant") == []  # cut while streaming: "the assistant manager" may follow
    assert lasting_reasons("Yes. The assistant got it") == ['narrates "the assistant"']


@pytest.mark.parametrize("text,language", [
    ("I asked my assistant to book the room.", "en"),
    ("The assistant manager signed off on my rota.", "en"),
    ("我的助手说下周再谈。", "zh"),
])
def test_an_assistant_the_user_has_is_not_narration(text, language):
    assert speaks_as_user(text, language).ok


def test_no_user_turn_of_the_dataset_has_a_lasting_reason(demo_user_turns):
    """A draft with a lasting reason is stopped while it streams: none of PAL-Set's own user turns (the demo data's
    862, English and Chinese) would have been."""
    from sim.persona_check import lasting_reasons

    assert len(demo_user_turns) > 800
    assert [text for text, name in demo_user_turns if lasting_reasons(text, name)] == []


def test_a_turn_said_again_word_for_word_or_nearly_repeats_an_earlier_one():
    """The 1.5B as user 1006 sent its opening again as its next turn while recording the demo workspace, and as user
    1002 said "I understand this new requirement for my mother, yes." three turns running, once with one word
    changed; a short reaction may rightly come twice."""
    opening = "我听说年底会进行交叉检查，温江万达店得了86分，在片区排第三，差评数比国庆时下降了一半多，但人效仍是8家店里最低的。"
    assert repeats_earlier(opening, ["不对，不是这个。", opening])
    assert repeats_earlier(" " + opening.replace("，", ", "), [opening])  # spaces and punctuation aside
    assert not repeats_earlier(opening, [])
    assert repeats_earlier(opening, [opening[:-10]])  # most of it copied
    assert not repeats_earlier(opening, ["我听说年底会进行交叉检查，想问问怎么准备。"])  # words in common are not a repeat
    mother = "I understand this new requirement for my mother, yes, and I will make sure she gets it."
    assert repeats_earlier(mother.replace("this", "the"), [mother])
    assert not repeats_earlier("不对，不是这个。", ["不对，不是这个。"])  # a short reaction
    said = "Sure, I understand. Can you please specify what is needed?"
    assert repeats_earlier(said.upper(), [said])
    assert repeats_earlier(said + " For my classes.", [said])  # nearly
    assert not repeats_earlier("Sure, I understand. My classes start at eight and I need the rota by Friday so I can "
                               "plan the week around them.", [said])
    assert not repeats_earlier("No, that's not it.", ["No, that's not it."])
    # … but not a third time word for word ("好的，请继续！" four turns running: the 1.5B as user 1006)
    assert repeats_earlier("好的，请继续！", ["好的，请继续！", "我建议…", "好的，请继续！"])
    assert not repeats_earlier("好的，请继续！", ["好的，请继续吧，我想听听。", "好的，请继续！"])


def test_no_turn_of_the_dataset_repeats_an_earlier_one_of_its_speaker(demo_dataset):
    """PAL-Set's own dialogues (the demo data's 862 turns, English and Chinese) never say a turn again, word for word
    or nearly, the user's nor the assistant's, and no assistant reply copies most of the user's message before it:
    the rule asks again only what the dataset never does."""
    said = 0
    for user in demo_dataset.users.values():
        for session in user.sessions:
            earlier: dict[str, list[str]] = {"user": [], "assistant": []}
            for turn in session.turns:
                for side, utterance in (("user", turn.user), ("assistant", turn.assistant)):
                    if utterance is not None:
                        assert not repeats_earlier(utterance.content, earlier[side]), utterance.content
                        if side == "assistant" and turn.user is not None:
                            assert not repeats_earlier(utterance.content, [turn.user.content]), utterance.content
                        earlier[side].append(utterance.content)
                        said += 1
    assert said > 1600


def test_an_opening_gives_the_need_away_only_when_it_copies_it_and_not_the_user_query(demo_dataset):
    """The opening rule (:class:`HiddenNeed`), on the demo data (CC BY-NC, licenses/): no user query of its 153 topics,
    nor any session's first user turn, copies its topic's requirement or implicit needs — so the rule asks again
    only what PAL-Set's users never do; the requirement said word for word as an opening gives it away."""
    from sim.persona_check import HiddenNeed
    from sim.prompting import hidden_need

    topics = 0
    for user in demo_dataset.users.values():
        for session in user.sessions:
            for n, topic in enumerate(session.topics):
                hidden = hidden_need(topic)
                assert not hidden.given_away(topic.topic.user_query), topic.topic.user_query
                first = session.turns[0].user if n == 0 and session.turns else None
                assert first is None or not hidden.given_away(first.content), first.content
                assert hidden.given_away(topic.topic.requirement)
                topics += 1
    assert topics == 153
    typed = hidden_need(topic, free_query=topic.topic.requirement)  # a person typed the need as their question
    assert not typed.given_away(topic.topic.requirement)
    assert not HiddenNeed(("I need a fair rota for the night shifts",), "Rota help?").given_away("Rota help?")
