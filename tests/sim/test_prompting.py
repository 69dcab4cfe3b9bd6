"""How the dialogue roles' messages are assembled: order, a stable prefix from turn to turn, the user's language."""

import pytest

from palset.loader import load_dataset
from palset.vocab import Act
from sim.acts import definition
from sim.persona_check import detect_language, speaks_as_user
from sim.prompting import (
    assistant_messages,
    assistant_note,
    echo_sources,
    kept_note,
    load_role_prompt,
    simulator_messages,
    summary_note,
)
from sim.simulator import TopicContext
from sim.types import Utterance
from tests.conftest import DEMO


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


def ctx_of(demo, uid):
    user = demo.users[uid]
    session = user.query[0]
    return TopicContext(user=user, session=session, topic=session.topics[0])


def dataset_history(ctx, turns):
    """The session's own dialogue as utterances, ``turns`` turns of it."""
    out = []
    for no, t in enumerate(ctx.session.turns[:turns], start=1):
        out.append(Utterance(turn_no=no, side="user", actor="simulator", act=t.user.action, content=t.user.content))
        out.append(Utterance(turn_no=no, side="assistant", actor="assistant", act=t.assistant.action,
                             content=t.assistant.content))
    return out


def flat(messages):
    return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)


def test_simulator_messages_put_the_persona_first_and_the_act_last(demo):
    ctx = ctx_of(demo, "1000")
    prompt = load_role_prompt("sim/user_simulator", "en")
    history = dataset_history(ctx, 1)
    msgs = simulator_messages(prompt, ctx, Act.REQUIREMENT_CONFIRMATION, history)
    assert [m["role"] for m in msgs] == ["system", "user"]  # no worked example a small model would copy as its reply
    system, last = msgs[0]["content"], msgs[-1]["content"]
    assert "Jane" not in system
    assert system.index(ctx.user.profile.name) < system.index(ctx.topic.topic.implicit_needs[0])  # persona, then phase
    assert ctx.topic.topic.user_query in system
    assert last.index(history[0].content) < last.index(history[1].content) < last.rindex("Requirement Confirmation")
    assert last.rstrip().endswith(msgs and "without volunteering other needs.")  # the act's definition is the very end
    opening = simulator_messages(prompt, ctx, Act.TOPIC_INQUIRY, [])
    assert "has not started" in opening[-1]["content"] and "Topic Inquiry" in opening[-1]["content"]


def test_simulator_phase_knowledge_is_never_both_phases(demo):
    ctx = ctx_of(demo, "1000")
    prompt = load_role_prompt("sim/user_simulator", "en")
    need = ctx.topic.topic.implicit_needs[0]
    pref = ctx.preference().preference.pos
    asking = simulator_messages(prompt, ctx, Act.REQUIREMENT_CONFIRMATION, dataset_history(ctx, 1))[0]["content"]
    judging = simulator_messages(prompt, ctx, Act.SOLUTION_FEEDBACK, dataset_history(ctx, 3))[0]["content"]
    assert need in asking and pref not in asking
    assert pref in judging and need not in judging
    # the persona part is shared: a phase change re-reads only the knowledge and what follows it
    shared = asking[:asking.index("The question on")]
    assert judging.startswith(shared)


@pytest.mark.parametrize("uid", ["1000", "1006"])
def test_each_simulator_turn_starts_with_the_previous_turns_text(demo, uid):
    """Turn n+1's messages are turn n's up to the end of its transcript (only the short cue differs): the server's
    prompt cache serves everything said so far."""
    ctx = ctx_of(demo, uid)
    prompt = load_role_prompt("sim/user_simulator", ctx.user.language)
    acts = [t.user.action for t in ctx.session.turns]
    for n in (1, 3):  # turns 2→3 (both guessing the need) and 4→5 (both on solutions) of the demo sessions
        before = flat(simulator_messages(prompt, ctx, acts[n], dataset_history(ctx, n)))
        after = flat(simulator_messages(prompt, ctx, acts[n + 1], dataset_history(ctx, n + 1)))
        cue_start = before.index(ctx.session.turns[n - 1].assistant.content)  # the transcript's last words
        shared = before[:cue_start + len(ctx.session.turns[n - 1].assistant.content)]
        assert after.startswith(shared)
        assert len(shared) > 0.9 * len(before)


def test_assistant_messages_grow_at_their_end_with_the_note_last(demo):
    ctx = ctx_of(demo, "1000")
    prompt = load_role_prompt("sim/assistant", "en")
    history = dataset_history(ctx, 3)
    turn2 = assistant_messages(prompt, ctx, history[:3], assistant_note(prompt, ctx, Act.REQUIREMENT_PREDICTION, "- m1"))
    turn3 = assistant_messages(prompt, ctx, history[:5], assistant_note(prompt, ctx, Act.SOLUTION_PROPOSAL, "- m2"))
    assert [m["role"] for m in turn3] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert turn3[:len(turn2) - 1] == turn2[:-1]  # everything before turn 2's last message is reused as it was
    assert turn2[-1]["content"].startswith(history[2].content)  # the user's words come first in the last message...
    assert turn3[len(turn2) - 1]["content"] == history[2].content  # ...and stay, without the note, afterwards
    note = turn3[-1]["content"]
    assert note.index(history[4].content) < note.index("- m2") < note.index("Act: Solution Proposal.")
    # the query summary shares everything up to the user's latest words
    summary = assistant_messages(prompt, ctx, history[:5], summary_note(load_role_prompt("sim/query_summary", "en"), ctx))
    assert summary[:-1] == turn3[:-1] and summary[-1]["content"].startswith(history[4].content)
    assert "what does the user need" in summary[-1]["content"]


def test_a_retrieval_note_stays_in_the_transcript_without_its_act_line(demo):
    """An earlier turn's retrieved memory stays where it was sent, after the words it answered, so
    the next turn's messages repeat the last ones up to the end of that memory (a prompt cache serves them); the
    line asking for that turn's act is not kept."""
    for uid, language in (("1000", "en"), ("1006", "zh")):
        ctx = ctx_of(demo, uid)
        prompt = load_role_prompt("sim/assistant", language)
        history = dataset_history(ctx, 3)
        sent = assistant_note(prompt, ctx, Act.REQUIREMENT_PREDICTION, "- m1")
        turn2 = assistant_messages(prompt, ctx, history[:3], sent)
        kept = kept_note(prompt, "- m1")
        assert sent.startswith(kept) and "- m1" in kept and "Requirement Prediction" not in kept and "需求推测" not in kept
        history[3] = history[3].model_copy(update={"note": kept})  # the assistant's turn 2, as the run stores it
        turn3 = assistant_messages(prompt, ctx, history[:5], assistant_note(prompt, ctx, Act.SOLUTION_PROPOSAL, "- m2"))
        assert turn3[:len(turn2) - 1] == turn2[:-1]
        assert turn3[len(turn2) - 1]["content"] == f"{history[2].content}\n\n{kept}"
        assert turn2[-1]["content"].startswith(turn3[len(turn2) - 1]["content"])  # served from the cache up to there
        assert turn3[-1]["content"].count("- m1") == 0 and "- m2" in turn3[-1]["content"]


def test_a_memory_that_does_not_change_sits_in_the_system_message(demo):
    ctx = ctx_of(demo, "1000")
    prompt = load_role_prompt("sim/assistant", "en")
    history = dataset_history(ctx, 1)[:1]
    msgs = assistant_messages(prompt, ctx, history, assistant_note(prompt, ctx, Act.REQUIREMENT_PREDICTION, None),
                              static_memory="- [2024-12-01 09:00] the user searched for night-shift sleep tips")
    assert "night-shift sleep tips" in msgs[0]["content"] and "night-shift" not in msgs[-1]["content"]
    assert "What you know about the user" not in msgs[-1]["content"]


def test_chinese_users_get_the_chinese_wording_and_english_on_request(demo, monkeypatch):
    ctx = ctx_of(demo, "1006")
    sim = load_role_prompt("sim/user_simulator", "zh")
    assert sim.name == "sim/user_simulator.zh"
    msgs = simulator_messages(sim, ctx, Act.REQUIREMENT_CONFIRMATION, dataset_history(ctx, 1))
    assert all(detect_language(m["content"]) == "zh" for m in msgs)
    assert "需求确认" in msgs[-1]["content"] and "用简体中文" in msgs[-1]["content"]
    assistant = load_role_prompt("sim/assistant", "zh")
    note = assistant_note(assistant, ctx, Act.REQUIREMENT_PREDICTION, "- 记忆")
    assert "需求推测" in note and "简体中文" in note and detect_language(note) == "zh"
    monkeypatch.setenv("PAL_PROMPT_WORDING", "english")  # the measured alternative: English text, "in Chinese"
    english = load_role_prompt("sim/user_simulator", "zh")
    assert english.name == "sim/user_simulator"
    msgs = simulator_messages(english, ctx, Act.REQUIREMENT_CONFIRMATION, dataset_history(ctx, 1))
    assert "in Chinese (简体中文)" in msgs[-1]["content"] and "Requirement Confirmation" in msgs[-1]["content"]
    assert msgs[0]["content"].startswith("You write the chat messages")  # the English wording's system message


def test_a_style_fragment_goes_into_the_system_message_before_the_phase_knowledge(demo):
    ctx = ctx_of(demo, "1000")
    prompt = load_role_prompt("sim/user_simulator", "en")
    system = simulator_messages(prompt, ctx, Act.TOPIC_INQUIRY, [], fragment="# How you talk\nshort and dry")[0]["content"]
    assert ctx.user.profile.name in system[:system.index("short and dry")]
    assert system.index("short and dry") < system.index(ctx.topic.topic.implicit_needs[0])


def test_a_cut_transcript_says_so(demo):
    ctx = ctx_of(demo, "1000")
    prompt = load_role_prompt("sim/user_simulator", "en")
    history = dataset_history(ctx, 3)
    msgs = simulator_messages(prompt, ctx, Act.SOLUTION_FEEDBACK, history[2:], dropped=2)
    assert "2 earlier message(s) left out" in msgs[-1]["content"] and history[0].content not in msgs[-1]["content"]


@pytest.mark.parametrize("uid", ["1000", "1006"])
def test_a_copy_of_the_cue_or_the_assistant_does_not_speak_as_the_user(demo, uid):
    """What the 0.5B model did: answer with the act's definition, or with the assistant's guess."""
    ctx = ctx_of(demo, uid)
    prompt = load_role_prompt("sim/user_simulator", ctx.user.language)
    history = dataset_history(ctx, 1)
    msgs = simulator_messages(prompt, ctx, Act.REQUIREMENT_CONFIRMATION, history)
    sources = echo_sources(msgs, history)
    lang = "zh" if ctx.user.language == "zh" else "en"
    for copy in (definition("user", Act.REQUIREMENT_CONFIRMATION, lang), history[-1].content):
        verdict = speaks_as_user(copy, ctx.user.language, sources)
        assert not verdict.ok and "repeats the assistant or the prompt" in verdict.reasons


def test_a_reply_is_cut_where_the_model_writes_the_next_speaker_and_after_a_copied_cue():
    from sim.prompting import cut_at_speaker

    assert cut_at_speaker("Yes, the night shifts.\nAssistant: And knowing you…", "Jane") == "Yes, the night shifts."
    assert cut_at_speaker('助手刚才说：“是刘梅那一栏吧？”\n对，就是她。\n助手：那你……', "罗晓岚") == "对，就是她。"
    assert cut_at_speaker("The assistant just wrote: \"x\"", "Jane") == "The assistant just wrote: \"x\""  # nothing else
    # the 1.5B, recording the demo workspace (users 1001, 1002): the user's words, then what "the assistant replied"
    said = ("I will not accept this proposed rule, as it would limit my ability to handle her demands.\n"
            'The assistant replied: "I will not accept this proposed rule."')
    assert cut_at_speaker(said, "Nadia Haddad") == "I will not accept this proposed rule, as it would limit my ability " \
                                                   "to handle her demands."
    assert cut_at_speaker('The assistant replied: "Is it the rota?"\nYes, the rota.', "Jane") == "Yes, the rota."
    assert cut_at_speaker("对，就是她。\n助手回复：好的。", "罗晓岚") == "对，就是她。"
    assert cut_at_speaker("I asked my assistant.\nShe said no.", "Jane") == "I asked my assistant.\nShe said no."


def test_saying_again_what_the_user_said_before_is_not_a_copy(demo):
    """A user who denied one guess may deny the next in the same words; copying the assistant still fails."""
    ctx = ctx_of(demo, "1000")
    prompt = load_role_prompt("sim/user_simulator", "en")
    history = dataset_history(ctx, 2)
    history[2] = history[2].model_copy(update={"content": "No, that's not it at all."})
    msgs = simulator_messages(prompt, ctx, Act.REQUIREMENT_CONFIRMATION, history)
    sources = echo_sources(msgs, history)
    assert speaks_as_user("No, that's not it at all.", "en", sources).ok
    assert not speaks_as_user(history[-1].content, "en", sources).ok
