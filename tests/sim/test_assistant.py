"""The assistant role's retrieval query (sim/assistant.py): one streamed line, shown before the reply."""

from __future__ import annotations

from palset.vocab import Act
from sim.assistant import query_text
from tests.sim.conftest import default_reply, side_of, sim_for


def test_the_query_is_the_first_line_without_label_quotes_or_json():
    assert query_text("how to get staff for the Q2 cycle\nBecause the user…") == "how to get staff for the Q2 cycle"
    assert query_text('\n  Query: "staff shortage at work"') == "staff shortage at work"
    assert query_text("查询：强制分布下给刘梅定绩效") == "强制分布下给刘梅定绩效"
    assert query_text('{"query": "work from home focus time"}') == "work from home focus time"  # the v2 habit
    assert query_text("Search query: 「育儿与工作的冲突」") == "育儿与工作的冲突"
    # the 1.5B's, recording user 1003 of the demo workspace
    assert query_text('search for "cover plan 11c2') == "cover plan 11c2"
    assert query_text('Search: "How do I create a cover plan for my classes?') == "How do I create a cover plan for my classes?"
    assert query_text("搜索：产假前的工作交接") == "产假前的工作交接"
    assert query_text("Searching for a cover plan") == "Searching for a cover plan"  # words, not a label
    assert query_text("") == "" and query_text("\n\n") == "" and query_text('"…"') == ""


def test_a_retrieval_assistant_streams_its_query_before_its_reply(demo, sim_env):
    """The memory search is the first thing a retrieval assistant's turn shows; the reply's tokens
    come after every token of the query, and the utterance keeps the query it retrieved with."""
    make_llm, store = sim_env
    sim, fake = sim_for(demo, make_llm, store, method="rag-turn")
    events: list[tuple[str, str]] = []
    while (slot := sim.next_slot()) is not None and slot[1] == "user":
        sim.step()
    utt = sim.step(on_token=lambda t: events.append(("reply", t)), on_query=lambda t: events.append(("query", t)))
    assert utt is not None and utt.side == "assistant"
    kinds = [k for k, _ in events]
    assert "query" in kinds and "reply" in kinds
    assert kinds.index("reply") > max(i for i, k in enumerate(kinds) if k == "query")
    shown = [t for k, t in events if k == "query"]
    assert shown[-1] == utt.retrieval_query == "help with sleep"  # the page's last query is the one searched with
    assert all(later.startswith(earlier) for earlier, later in zip(shown, shown[1:-1]))  # it grows as it streams
    summary = [r for r in fake.requests if side_of(r) == "summary"]
    assert summary and summary[-1].stop == ["\n"] and summary[-1].response_format is None  # plain text, one line


def test_a_query_summary_with_nothing_usable_retrieves_by_the_users_last_words(demo, sim_env):
    make_llm, store = sim_env
    sim, _ = sim_for(demo, make_llm, store, method="rag-turn",
                     reply=lambda req: "…" if side_of(req) == "summary" else default_reply(req))
    record = sim.run()
    assert record.status == "finished", record.error
    first_user = next(u for u in record.utterances if u.side == "user")
    first_assistant = next(u for u in record.utterances if u.side == "assistant")
    assert first_assistant.retrieval_query == first_user.content


def test_a_method_without_retrieval_asks_no_query_and_streams_none(demo, sim_env):
    make_llm, store = sim_env
    sim, fake = sim_for(demo, make_llm, store, method="vanilla-log")
    queried: list[str] = []
    while (slot := sim.next_slot()) is not None and slot[1] == "user":
        sim.step()
    utt = sim.step(on_query=queried.append)
    assert utt is not None and utt.retrieval_query is None and not queried
    assert not [r for r in fake.requests if side_of(r) == "summary"]


def test_no_assistant_line_of_the_dataset_reads_as_its_instruction(demo_dataset):
    """A reply line that mostly rewords the act's name and definition is asked again (``without_copied_note``); none
    of PAL-Set's own assistant lines (the demo data, English and Chinese) would be, whichever act is asked."""
    from sim.acts import PURPOSE, act_name, definition
    from sim.assistant import without_copied_note

    lines = [(line, u.language) for u in demo_dataset.users.values() for s in u.sessions for t in s.turns
             for line in t.assistant.content.splitlines() if line.strip()]
    assert len(lines) > 800 and {language for _, language in lines} == {"en", "zh"}
    copied = [line for line, language in lines for act in PURPOSE  # the assistant's acts
              if without_copied_note(line, "", f"{act_name(act, language)} {definition('assistant', act, language)}")
              is None]
    assert copied == []


def test_a_reply_about_the_user_or_in_the_prompts_terms_is_caught_and_none_of_the_dataset(demo_dataset):
    """48 of the 340 replies the 1.5B recorded talked about "the user" or in the prompt's terms; PAL-Set's own assistant
    turns speak to the user, never about them, in English and Chinese."""
    from sim.assistant import talks_about_the_user

    for reply in ["Based on the information provided, the user seems to be looking for a place to live.",
                  "You've mentioned a couple of hidden needs: supporting Callum and the rota.",
                  "Sure! Here's a concrete solution proposal for you.", "用户需要一份整改方案。",
                  "Yes, there is a hidden need related to your user's question.",
                  "Based on the information provided, your user needs to make a decision about the lease.",
                  "Is it that you have not told me about your mother's rule for every contact?"]:
        assert talks_about_the_user(reply), reply
    for reply in ["Do you want the rota agreed with your ward manager before Christmas?",
                  "I suggest you ask your user group at work for two volunteers.", "我建议你先和刘梅单独谈一次。",
                  "Your users will notice the latency first, so alert on it.", "Check your user research notes.",
                  "You haven't told me your budget yet: is it under $1,500?"]:
        assert not talks_about_the_user(reply), reply
    turns = [t.assistant.content for u in demo_dataset.users.values() for s in u.sessions for t in s.turns]
    assert len(turns) > 800 and [t for t in turns if talks_about_the_user(t)] == []


def test_a_proposal_that_asks_the_user_for_one_is_caught_and_none_of_the_dataset(demo_dataset):
    """The 1.5B, asked to propose, asked the user for the proposal in 21 of 108 recorded replies (19 Chinese: it reads
    提出一个具体的方案 as a request); PAL-Set's own assistant turns never do, whatever their act."""
    from sim.assistant import asks_for_proposal

    for reply in ["好的，请提供你的方案。", "好的，请根据你的需求和提供的信息，提出一个具体的方案。", "请告诉我你的想法和建议。",
                  "Sure! How can we start with the proposed solution?", "Please share your ideas with me.",
                  "What would you suggest?", "我建议你提供一个具体的方案，这个方案是在线上跑现场。"]:
        assert asks_for_proposal(reply, Act.SOLUTION_PROPOSAL), reply
        assert not asks_for_proposal(reply, Act.SOLUTION_DISCUSSION)  # "请继续" may rightly end a discussion turn
    for reply in ["我建议你们在补充约定里写一条折中条款：三亚行8天。", "How about a written rota for the holidays?",
                  "好的，我建议先和刘梅单独谈一次，把评分标准摊开讲。", "我建议你和前夫签一份探视补充约定，写清接送时间。"]:
        assert not asks_for_proposal(reply, Act.SOLUTION_PROPOSAL), reply
    turns = [t.assistant.content for u in demo_dataset.users.values() for s in u.sessions for t in s.turns]
    assert len(turns) > 800 and [t for t in turns if asks_for_proposal(t, Act.SOLUTION_PROPOSAL)] == []


def test_a_label_from_the_instruction_alone_is_not_a_reply():
    """"方案讨论：" was the 1.5B's whole reply to user 1006 once; "方案提议：" began another, its proposal after it."""
    from sim.acts import act_name, definition
    from sim.assistant import without_copied_note

    def instruction(act: Act) -> str:
        return f"{act_name(act, 'zh')} {definition('assistant', act, 'zh')}"

    assert without_copied_note("方案讨论：", "", instruction(Act.SOLUTION_DISCUSSION)) is None
    proposal = "我们建议先和刘梅单独谈一次。"
    assert without_copied_note(f"方案提议：\n{proposal}", "", instruction(Act.SOLUTION_PROPOSAL)) == proposal
    assert without_copied_note("我的建议：", "", instruction(Act.SOLUTION_PROPOSAL)) == "我的建议："  # not the instruction's


def test_a_reply_that_ends_announcing_what_was_cut_loses_the_announcement():
    """Decoding stops at a reply's first blank line, so "Here's how you could do it:" before a list kept nothing."""
    from sim.assistant import announces_more, without_announcement

    cut = "Certainly! I suggest a structured, measurable approach to what keeps you at V5. Here's how you could do it:"
    assert announces_more(cut) and announces_more("具体步骤如下：") and not announces_more("Try a written rota.")
    assert without_announcement(cut) == "Certainly! I suggest a structured, measurable approach to what keeps you at V5."
    assert without_announcement("我建议你先和刘梅谈一次。\n具体步骤如下：") == "我建议你先和刘梅谈一次。"
    assert without_announcement("Here's how you could do it:") == "Here's how you could do it:"  # nothing before it
    assert without_announcement("Try a written rota.") == "Try a written rota."


def test_a_reply_thanking_the_user_for_help_is_the_users_line_and_none_of_the_dataset(demo_dataset):
    """2 of the 340 replies the 1.5B recorded thanked the user for help, as the user would ("Thank you for your help!
    I'm considering adding a dedicated team meeting…"); PAL-Set's own assistant turns never do (demo data, CC BY-NC)."""
    from sim.assistant import thanks_like_the_user, why_asked_again

    for reply in ["Thank you for your help! I'm considering adding a dedicated team meeting.",
                  "Thanks for the suggestion, I'll try it tonight.", "收到！我理解你的想法。谢谢你的帮助！", "感谢您的建议。",
                  "明白了，谢谢您的耐心和指导！我已接受您的建议。", "明白，我会努力把这笔钱备出来。谢谢你的提醒。",
                  "I accept your suggestion and will talk to Denise."]:
        assert thanks_like_the_user(reply), reply
        assert why_asked_again(reply, Act.FEEDBACK_RESPONSE, [], "") == "thanks the user for help, as the user would"
    for reply in ["Thank you for sharing that — is it the rota that keeps you up?", "Thanks for your feedback.",
                  "谢谢你告诉我这些。你是想先和刘梅谈一次吗？", "I suggest you thank your team for their help at the retro.",
                  "If they accept your proposal, book the hall.", "我建议你接受她的安排。"]:
        assert not thanks_like_the_user(reply), reply
    turns = [t.assistant.content for u in demo_dataset.users.values() for s in u.sessions for t in s.turns]
    assert len(turns) > 800 and [t for t in turns if thanks_like_the_user(t)] == []
