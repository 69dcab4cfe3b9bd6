"""The simulator and the assistant with a scripted LLM: schedules, phase knowledge, takeover, stop, retries, resume."""

import json

import pytest

from palset.loader import load_dataset
from palset.vocab import Act
from sim.schedule import derived_schedule
from sim.service import SimulationSetupError, make_spec
from sim.simulator import ASSISTANT_TURN_TOKENS, SimulationError, sampling_seed
from testkit.requests import act_code, act_of
from tests.conftest import DEMO
from tests.sim.conftest import default_reply, finished_run, side_of, sim_for, user_says


def test_derived_schedule_has_the_fixed_shape():
    for seed in map(str, range(20)):
        s = derived_schedule(seed)
        assert 5 <= len(s) <= 7
        assert s[:3] == [(Act.TOPIC_INQUIRY, Act.REQUIREMENT_PREDICTION),
                         (Act.REQUIREMENT_CONFIRMATION, Act.REQUIREMENT_PREDICTION),
                         (Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_PROPOSAL)]
        assert s[-1] == (Act.SOLUTION_FEEDBACK, Act.FEEDBACK_RESPONSE)
        assert sum(a is Act.SOLUTION_PROPOSAL for _, a in s) == 2
    assert derived_schedule("x") == derived_schedule("x")


def test_fixed_run_follows_the_schedule_and_saves_every_turn(demo, sim_env):
    make_llm, store = sim_env
    sim, _ = sim_for(demo, make_llm, store)
    saved_counts = []
    record = sim.run(on_utterance=lambda u: saved_counts.append(len(store.load(sim.record.run_id).utterances)))
    assert record.status == "finished"
    acts = [(u.side, u.act) for u in record.utterances]
    expected = [x for u, a in record.schedule for x in (("user", u), ("assistant", a))]
    assert acts == expected
    assert saved_counts == list(range(1, len(expected) + 1))  # persisted before the next one starts
    assert store.load(record.run_id).status == "finished"
    assert "derived" in record.schedule_source


def test_simulator_knowledge_depends_on_the_phase(demo, sim_env):
    make_llm, store = sim_env
    sim, fake = sim_for(demo, make_llm, store)
    sim.run()
    topic = sim.ctx.topic
    pref = sim.ctx.user.preferences[topic.requirement_type_id].preference
    user_prompts = {}
    for req in fake.requests:
        if side_of(req) == "user":  # the phase's knowledge is in the system message, the act in the last message
            user_prompts.setdefault(act_of(req), req.messages[0].content + req.messages[-1].content)
    need = topic.topic.implicit_needs[0]
    liked = topic.solution_preference.pos_list[0].solution
    req_phase = user_prompts["Topic Inquiry"]
    assert need in req_phase and topic.topic.user_query in req_phase
    assert pref.pos not in req_phase and liked not in req_phase
    sol_phase = user_prompts["Solution Feedback"]
    assert pref.pos in sol_phase and liked in sol_phase
    assert need not in sol_phase


def test_assistant_turns_keep_retrieval_trace_and_prompt(demo, sim_env):
    make_llm, store = sim_env
    sim, _ = sim_for(demo, make_llm, store, method="rag-turn")
    record = sim.run()
    assistant = [u for u in record.utterances if u.side == "assistant"]
    assert all(u.trace and u.prompt and u.retrieval_query == "help with sleep" for u in assistant)
    assert all(u.trace["as_of_session"] == "1000_sample7" for u in assistant)
    assert all(all(i["session"] < "1000_sample7" or i["layer"] == "log" for i in u.trace["items"]) for u in assistant)
    assert assistant[0].trace["purpose"] == "requirement" and assistant[-1].trace["purpose"] == "solution"


def test_a_retrieval_assistant_reads_each_retrieved_item_once(demo, sim_env):
    """Each assistant turn's prompt repeats the previous one's messages as they were sent, up to
    the end of its retrieved memory (so llama.cpp's prompt cache serves them), and a turn's note holds only what no
    earlier note shows; the utterance keeps every retrieved item and which ones were not sent again."""
    make_llm, store = sim_env
    queries = iter(["help with sleep", "help with sleep", "money worries at home", "help with sleep"])

    def reply(req):
        if side_of(req) == "summary":
            return next(queries, "help with sleep")
        return default_reply(req)

    sim, fake = sim_for(demo, make_llm, store, method="rag-turn", reply=reply)
    record = sim.run()
    assert record.status == "finished", record.error
    answers = [r.messages for r in fake.requests if side_of(r) == "assistant"]
    assistant = [u for u in record.utterances if u.side == "assistant"]
    assert len(answers) == len(assistant) >= 3
    for before, after in zip(answers, answers[1:], strict=False):
        assert after[:len(before) - 1] == before[:-1]
        assert before[-1].content.startswith(after[len(before) - 1].content)  # the act line alone is not kept
    assert all(u.note and u.note in u.prompt for u in assistant)
    second = assistant[1]  # the same query again: nothing new to send, every item still retrieved
    assert second.trace["items"] and len(second.trace["repeated"]) >= len(second.trace["items"])
    assert "nothing new" in second.note
    third = assistant[2]  # a new query: only its new items are sent
    fresh = [i["text"] for i in third.trace["items"] if i["text"] not in assistant[0].note]
    assert fresh and all(text in third.note for text in fresh) and third.trace["repeated"]
    last = "\n".join(m.content for m in answers[-1])
    shown = {i["text"] for u in assistant for i in u.trace["items"]}
    assert shown and all(last.count(text) == 1 for text in shown)


def test_a_person_can_take_over_either_side_and_hand_back(demo, sim_env):
    make_llm, store = sim_env
    sim, _ = sim_for(demo, make_llm, store)
    record = sim.run(human_sides=frozenset({"user"}))
    assert record.utterances == [] and sim.next_slot()[1] == "user"
    sim.step(human_text="How do I fix my Christmas rota?")
    sim.run(human_sides=frozenset({"user"}))
    assert [u.actor for u in sim.record.utterances] == ["human", "assistant"]
    sim.step()  # handed back: the simulator plays the user again
    sim.step(human_text="I think you need to swap a night.")
    assert [u.actor for u in sim.record.utterances] == ["human", "assistant", "simulator", "human"]
    with pytest.raises(SimulationError, match="empty"):
        sim.step(human_text="   ")


def test_stop_ends_cleanly_and_keeps_turns(demo, sim_env):
    make_llm, store = sim_env
    sim, _ = sim_for(demo, make_llm, store)
    sim.step()
    sim.step()
    sim.stop()
    assert sim.next_slot() is None and sim.run().status == "stopped"
    assert len(store.load(sim.record.run_id).utterances) == 2


def test_empty_or_broken_turns_are_retried_never_accepted(demo, sim_env):
    make_llm, store = sim_env
    calls = {"user": 0}

    def flaky(req):  # fixed mode: the simulator's turn is plain text
        if side_of(req) == "user":
            calls["user"] += 1
            return ["", "<Topic Inquiry>", "real words"][min(calls["user"] - 1, 2)]
        return default_reply(req)

    sim, _ = sim_for(demo, make_llm, store, reply=flaky)
    utt = sim.step()
    assert utt.content == "real words" and utt.attempts == 3

    def flaky_json(req):  # free mode: a structured call, whose own retries see the broken JSON first
        if side_of(req) == "user":
            calls["json"] = calls.get("json", 0) + 1
            return ['{"content": ""}', "not json", '{"content": "<Topic Inquiry>"}',
                    '{"content": "real words"}'][min(calls["json"] - 1, 3)]
        return default_reply(req)

    sim, _ = sim_for(demo, make_llm, store, reply=flaky_json, mode="free", seed="json")
    utt = sim.step()
    assert utt.content == "real words" and utt.attempts == 2  # 3 rejected answers inside the first attempt

    def hopeless(req):
        return "..." if side_of(req) == "user" else default_reply(req)

    sim2, _ = sim_for(demo, make_llm, store, reply=hopeless, seed="other")
    record = sim2.run()
    assert record.status == "failed" and "no usable utterance" in record.error
    # the opening had no usable draft either: it is the user query (and says so); the run fails at the next turn
    assert [u.side for u in record.utterances] == ["user", "assistant"] and record.utterances[0].fallback


def test_resume_after_interruption_without_duplicates(demo, sim_env):
    make_llm, store = sim_env
    calls = {"n": 0}

    def dies_midway(req):
        calls["n"] += 1
        if calls["n"] == 6:
            raise RuntimeError("process killed")
        return default_reply(req)

    sim, _ = sim_for(demo, make_llm, store, reply=dies_midway)
    with pytest.raises(RuntimeError):
        sim.run()
    partial = store.load(sim.record.run_id)
    assert 0 < len(partial.utterances) < 2 * len(partial.schedule)
    resumed, _ = sim_for(demo, make_llm, store)  # a new process opens the same spec
    assert resumed.record.run_id == sim.record.run_id and len(resumed.record.utterances) == len(partial.utterances)
    resumed.run()
    final = store.load(sim.record.run_id)
    keys = [(u.turn_no, u.side) for u in final.utterances]
    assert final.status == "finished" and len(keys) == len(set(keys)) == 2 * len(final.schedule)


def test_failed_runs_resume(demo, sim_env):
    make_llm, store = sim_env
    sim, _ = sim_for(demo, make_llm, store, reply=lambda r: "" if side_of(r) == "user" else default_reply(r))
    assert sim.run().status == "failed"  # at turn 2: an opening with no usable draft is the user query
    again, _ = sim_for(demo, make_llm, store)
    again.resume()
    assert again.run().status == "finished"


def test_free_mode_ends_on_the_simulators_marker_or_max_turns(demo, sim_env):
    make_llm, store = sim_env

    def ends_at_turn_3(req):
        if side_of(req) == "user":
            lines = req.messages[-1].content.splitlines()
            return json.dumps({"content": "ok", "end": sum(line.startswith("Assistant: ") for line in lines) >= 2})
        return default_reply(req)

    sim, _ = sim_for(demo, make_llm, store, reply=ends_at_turn_3, mode="free", max_turns=8)
    record = sim.run()
    assert record.status == "finished" and len(record.utterances) == 6
    sim2, _ = sim_for(demo, make_llm, store, reply=lambda r: json.dumps({"content": "more", "end": False})
                      if side_of(r) == "user" else default_reply(r), mode="free", max_turns=3, seed="b")
    assert len(sim2.run().utterances) <= 6


def test_setup_errors_name_what_is_missing(demo, sim_env):
    make_llm, store = sim_env
    llm, _ = make_llm()
    with pytest.raises(SimulationSetupError, match="no session"):
        make_llm.ws.open_simulation(demo, make_spec(demo, "1000", "1000_sample99", "topic-1", "vanilla"), llm)


def test_each_turn_is_sampled_with_its_own_seed_from_the_run(demo, sim_env):
    """Seeds come from (run, turn, side, attempt): a seeded endpoint (the local server) replays a run exactly."""
    make_llm, store = sim_env
    sim, fake = sim_for(demo, make_llm, store)
    sim.run()
    seeds = [r.seed for r in fake.requests if r.seed is not None]
    turns = len(sim.record.utterances)
    assert len(seeds) == turns and len(set(seeds)) == turns  # one per utterance, all different
    assert seeds[0] == sampling_seed(f"{sim.record.run_id}/1/user/1")


def test_both_sides_stream_their_text_in_fixed_mode_and_free_mode_user_turns_are_structured(demo, sim_env):
    """The Simulate page draws a turn as it streams (``on_token``): the User-LLM's fixed-mode turn is plain streamed
    text, like the assistant's; a free-mode user turn is one structured answer (it also decides whether to end)."""
    make_llm, store = sim_env
    sim, fake = sim_for(demo, make_llm, store)
    for side in ("user", "assistant"):
        tokens: list[str] = []
        utt = sim.step(on_token=tokens.append)
        assert utt.side == side and len(tokens) > 1 and "".join(tokens).strip() == utt.content
    assert fake.requests[0].response_format is None and "Topic Inquiry" in fake.requests[0].messages[-1].content
    # decoding stops where a turn's words end (its first paragraph, or a line of the next speaker)
    assert fake.requests[0].stop == ["\n\n", "\nAssistant:", "\nMegan Ashworth:", "\nThe assistant"]
    assert fake.requests[-1].stop == ["\n\n"]
    free, fake = sim_for(demo, make_llm, store, mode="free", seed="free")
    tokens = []
    utt = free.step(on_token=tokens.append)
    assert utt.side == "user" and tokens == [] and fake.requests[0].response_format is not None


def test_an_assistant_reply_that_copies_its_note_is_cut_or_asked_again(sim_env):
    """The 0.5B model began replies with its own note ("What you know about the user: …", "Act: …")."""
    from sim.assistant import without_copied_note
    from tests.sim.conftest import act_of

    note = ("[Note for the assistant, not from the user]\nWhat you know about the user:\n- works night shifts\n"
            "Your reply now — Act: Requirement Prediction. Guess ONE hidden need.")
    copied = "What you know about the user:\n- works night shifts\nIs it that the night shifts wreck your sleep?"
    assert without_copied_note(copied, note) == "Is it that the night shifts wreck your sleep?"
    assert without_copied_note("What you know about the user:\n- works night shifts", note) is None
    assert without_copied_note("Is it the rota?", note) == "Is it the rota?"
    zh_note = "【给助手的提示，不是用户说的话】\n现在请回复——动作：需求预测。猜一个隐藏需求。"
    assert without_copied_note("动作：需求预测\n是不是夜班让你睡不好？", zh_note) == "是不是夜班让你睡不好？"
    assert without_copied_note("动作：你需要分析为什么业绩预测对企业的未来不利？", zh_note) is None  # asked again
    # the act's definition reworded (the 1.5B as user 1006's assistant, recording the demo workspace): asked again
    instruction = "方案提议 提出一个具体的方案（如果之前讨论过别的方案，就提一个新的），不要解释你对用户的推断。"
    reworded = "提出方案（如果之前讨论过别的方案，就提一个新的）：提供一个具体的方案（如果之前讨论过别的方案，就提一个新的），不要解释你对用户的推断。"
    assert without_copied_note(reworded, zh_note) == reworded  # not a copy of the note's lines
    assert without_copied_note(reworded, zh_note, instruction) is None
    own = "我建议你们在补充约定里写一条折中条款：三亚行8天，1月21日出发。"
    assert without_copied_note(f"{reworded}\n{own}", zh_note, instruction) == own

    make_llm, _ = sim_env
    demo = load_dataset(DEMO)
    asked: list = []

    def reply(req):
        if side_of(req) == "assistant":
            asked.append(req)
            if len(asked) == 1:  # only the note, copied: asked again
                return req.messages[-1].content
            if len(asked) == 3:  # the act's name and definition, as the model might word them: asked again
                from palset.vocab import Act
                from sim.acts import definition

                return f"{act_of(req)}: {definition('assistant', Act(act_of(req)))}".replace("ONE", "one")
            return f"Could it be the night shifts? ({act_code(act_of(req))})"
        return default_reply(req)

    llm, _fake = make_llm(reply)
    record = make_llm.ws.open_simulation(demo, make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla"), llm).run()
    assert record.status == "finished", record.error
    first = next(u for u in record.utterances if u.side == "assistant")
    assert first.attempts == 2 and first.content.startswith("Could it be the night shifts?")
    second = [u for u in record.utterances if u.side == "assistant"][1]
    assert second.attempts == 2 and second.content.startswith("Could it be the night shifts?")


def test_a_turn_said_again_word_for_word_is_asked_again(sim_env):
    """A user turn or an assistant reply that says an earlier one of its own again, word for word, is asked again (the
    user's told why); the next draft is kept. The 1.5B did both while recording the demo workspace."""
    said = "I keep wondering how to move my night shifts so I can sleep properly before the exam week."
    guess = "Could it be that the night shifts keep you from sleeping well before your exams this month?"
    users: list = []
    assistants: list = []

    def reply(req):
        side = side_of(req)
        if side == "user":
            users.append(req)
            return user_says(req, said) if len(users) <= 2 else default_reply(req)
        if side == "assistant":
            assistants.append(req)
            return guess if len(assistants) <= 2 else default_reply(req)
        return default_reply(req)

    record, _topic = finished_run(sim_env, reply)
    user_turns = [u for u in record.utterances if u.side == "user"]
    assert user_turns[0].content == said and user_turns[0].attempts == 1
    assert user_turns[1].content != said and user_turns[1].attempts == 2
    assert "repeats an earlier message of its own (word for word or nearly)" in users[2].messages[-1].content
    replies = [u for u in record.utterances if u.side == "assistant"]
    assert replies[0].content == guess and replies[1].content != guess and replies[1].attempts == 2


def test_a_reply_nearly_saying_an_earlier_one_again_or_copying_the_user_is_asked_again(sim_env):
    """The 1.5B copied most of an earlier reply with a word changed (40 of 340 recorded replies), or most of what the
    user had just said (15): each is asked again; a reply of its own words is kept."""
    said = "I keep wondering how to move my night shifts so I can sleep properly before the exam week."
    guess = "Could it be that the night shifts keep you from sleeping well before your exams this month?"
    drafts = iter([said.replace("I keep", "So you keep") + " Right?", guess,
                   guess.replace("this month", "this term"), "Do you also need the rota agreed with your ward manager?"])

    def reply(req):
        if side_of(req) == "user":
            return user_says(req, said) if "Chat so far" not in req.messages[-1].content else default_reply(req)
        if side_of(req) == "assistant":
            return next(drafts, None) or default_reply(req)
        return default_reply(req)

    record, _topic = finished_run(sim_env, reply)
    replies = [u for u in record.utterances if u.side == "assistant"]
    assert (replies[0].content, replies[0].attempts) == (guess, 2)  # the copy of the user's words was asked again
    assert (replies[1].content, replies[1].attempts) == ("Do you also need the rota agreed with your ward manager?", 2)


def test_a_reply_about_the_user_is_asked_again(sim_env):
    """"Based on the information provided, the user seems to…" — the instruction showing through: asked again."""
    guess = "Do you want the night shifts moved so you can sleep before the exam week?"
    drafts = iter(["Based on the information provided, the user seems to want better sleep.", guess])

    def reply(req):
        return (next(drafts, None) if side_of(req) == "assistant" else None) or default_reply(req)

    record, _topic = finished_run(sim_env, reply)
    first = next(u for u in record.utterances if u.side == "assistant")
    assert (first.content, first.attempts) == (guess, 2)


def test_a_proposal_that_asks_the_user_for_one_is_asked_again(sim_env):
    """Asked to propose, the 1.5B often asked the user for the proposal ("好的，请提供你的方案。"): asked again."""
    from testkit.requests import act_of as act_named

    proposals: list = []

    def reply(req):
        if side_of(req) == "assistant" and act_named(req) == "Solution Proposal":
            proposals.append(req)
            return "Please share your ideas with me." if len(proposals) == 1 else "How about a written night-shift rota?"
        return default_reply(req)

    record, _topic = finished_run(sim_env, reply)
    first = next(u for u in record.utterances if u.side == "assistant" and u.act.value == "Solution Proposal")
    assert first.attempts == 2 and first.content == "How about a written night-shift rota?"


def test_a_reply_that_announces_a_cut_list_is_asked_again_and_the_last_loses_its_announcement(sim_env):
    """"Here's how you could do it:" ends a reply whose list the paragraph stop cut: asked again; the last try, kept,
    loses that sentence."""
    from testkit.requests import act_of as act_named

    announced = "I suggest a written rota for the night shifts. Here's how you could do it:"

    def reply(req):
        if side_of(req) == "assistant" and act_named(req) in ("Solution Proposal", "Solution Discussion"):
            return announced
        return default_reply(req)

    record, _topic = finished_run(sim_env, reply)
    first = next(u for u in record.utterances if u.side == "assistant" and u.act.value == "Solution Proposal")
    assert first.attempts == 3 and first.content == "I suggest a written rota for the night shifts."


def _judging_run(sim_env, decision):
    """A run whose User-LLM always answers as an assistant in plain text, and ``decision(req)`` to a decision."""
    asked = []

    def reply(req):
        last = req.messages[-1].content
        if side_of(req) == "user" and ("just guessed" in last or "just suggested" in last):
            asked.append(req)
            return decision(req)
        if side_of(req) == "user" and "The chat has not started" not in last:
            return "How can I help you with your rota today?"
        return default_reply(req)

    record, _topic = finished_run(sim_env, reply)
    return record, asked


def test_a_judging_turn_whose_drafts_never_speak_as_the_user_is_composed_from_the_models_decision(sim_env):
    """Requirement Confirmation and Solution Feedback: the decision's fixed words and the model's own clause; the
    utterance says it was composed and keeps the decision; other acts keep their last draft."""
    from sim.persona_check import speaks_as_user

    points = iter(["I need the swap approved in writing", "my worry is the night before New Year"])

    def decision(req):
        if "just guessed" in req.messages[-1].content:
            return json.dumps({"guessed": False, "point": next(points)})
        return json.dumps({"accept": True, "why": "How can I help?"})  # an assistant's clause: left out

    record, asked = _judging_run(sim_env, decision)
    user = [u for u in record.utterances if u.side == "user"]
    confirm = [u for u in user if u.act == Act.REQUIREMENT_CONFIRMATION]
    feedback = [u for u in user if u.act == Act.SOLUTION_FEEDBACK]
    assert confirm and feedback
    assert [u.content for u in confirm] == ["No, that's not it. I need the swap approved in writing",
                                            "No, that's not it. My worry is the night before New Year"]
    assert all(u.content == "Yes, I'll do that." for u in feedback)
    for u in confirm + feedback:
        assert u.fallback.startswith("composed from the model's decision") and speaks_as_user(u.content, "en").ok
    assert "guessed: no" in confirm[0].fallback and "left out" in feedback[0].fallback
    assert len(asked) == len(confirm) + len(feedback)
    assert asked[0].messages[0].content.startswith("You write the chat messages")  # the User-LLM's own system message
    others = [u for u in user if u.turn_no > 1 and u.act not in (Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_FEEDBACK)]
    assert all(not u.fallback and "How can I help" in u.content for u in others)  # no decision for other acts


def test_once_a_judging_turn_had_to_be_composed_later_ones_ask_for_the_decision_at_once(sim_env):
    """A model that could not word one judging turn as the user is not asked for three drafts of
    the next: the later judging turns are one decision call each (streamed to the page whole), and say why."""
    def decision(req):
        if "just guessed" in req.messages[-1].content:
            return json.dumps({"guessed": False, "point": "I need the swap approved in writing"})
        return json.dumps({"accept": False, "why": "I can't afford it"})

    record, asked = _judging_run(sim_env, decision)
    user = [u for u in record.utterances if u.side == "user"]
    judging = [u for u in user if u.act in (Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_FEEDBACK)]
    first, later = judging[0], judging[1:]
    assert len(later) >= 2 and len(asked) == len(judging)
    assert first.fallback.endswith("no draft spoke as the user") and first.attempts == 4  # three drafts, then the decision
    assert all(u.composed and u.attempts == 1 for u in later)
    assert all(u.fallback.endswith(f"asked at once, since turn {first.turn_no}'s drafts never spoke as the user")
               for u in later)
    assert [u.content for u in later if u.act == Act.SOLUTION_FEEDBACK][0].startswith("No")


def test_a_judging_turn_asked_at_once_streams_its_fixed_words_first(sim_env):
    make_llm, _ = sim_env
    demo = load_dataset(DEMO)

    def reply(req):
        last = req.messages[-1].content
        if side_of(req) == "user" and ("just guessed" in last or "just suggested" in last):
            return json.dumps({"guessed": False, "point": "my worry is money"} if "just guessed" in last
                              else {"accept": True, "why": ""})
        if side_of(req) == "user" and "The chat has not started" not in last:
            return "How can I help you with your rota today?"
        return default_reply(req)

    llm, _fake = make_llm(reply)
    sim = make_llm.ws.open_simulation(demo, make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla"), llm)
    while sim.next_slot() is not None:
        tokens: list[str] = []
        utt = sim.step(on_token=tokens.append)
        if utt.side == "user" and utt.attempts == 1 and utt.composed:
            # the decision streams: its fixed words as soon as its value is out, then the model's clause
            assert tokens[0] in ("No, that's not it.", "Yes, I'll do that.") and "".join(tokens) == utt.content
            break
    else:
        raise AssertionError("no judging turn was asked at once")


def test_a_decision_asked_at_once_that_comes_to_nothing_streams_no_draft_after_its_words(sim_env):
    """Its fixed words were shown while it streamed, but no valid JSON came: the turn is drafted as usual, without
    streaming the drafts after those words (the page redraws the kept turn)."""
    make_llm, _ = sim_env
    demo = load_dataset(DEMO)
    decisions = iter(range(100))

    def reply(req):
        last = req.messages[-1].content
        if side_of(req) == "user" and "just guessed" in last:
            point = "my worry is money" if next(decisions) == 0 else "x" * 400  # over the schema's bound
            return json.dumps({"guessed": False, "point": point})
        if side_of(req) == "user" and "The chat has not started" not in last:
            return "How can I help you with your rota today?"
        return default_reply(req)

    llm, _fake = make_llm(reply)
    sim = make_llm.ws.open_simulation(demo, make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla"), llm)
    confirmations = 0
    while sim.next_slot() is not None:
        tokens: list[str] = []
        utt = sim.step(on_token=tokens.append)
        if utt.side == "user" and utt.act == Act.REQUIREMENT_CONFIRMATION:
            confirmations += 1
            if confirmations == 2:
                assert tokens == ["No, that's not it."] and "How can I help" in utt.content and not utt.composed
                return
    raise AssertionError("fewer than two confirmations")


def test_no_valid_decision_keeps_the_last_draft(sim_env):
    record, asked = _judging_run(sim_env, lambda req: "not json at all")
    confirm = [u for u in record.utterances if u.side == "user" and u.act == Act.REQUIREMENT_CONFIRMATION]
    assert asked and confirm and all(not u.fallback and "How can I help" in u.content for u in confirm)


def test_an_assistant_turn_is_capped_and_a_cut_answer_keeps_its_whole_sentences(demo, sim_env):
    """The 0.5B wrote ~500 tokens a turn where PAL-Set's assistant writes 1–3 sentences: the turn is asked with a
    cap (sim.simulator.ASSISTANT_TURN_TOKENS), and an answer the cap cut mid-sentence ends at its last full stop."""
    rambling = "Try a short walk after dinner. " * 100 + "Then you could"

    def reply(req):
        return rambling if side_of(req) == "assistant" else default_reply(req)

    make_llm, store = sim_env
    llm, fake = make_llm(reply, cut=True)  # the fake cuts at max_tokens, as a server does
    sim = make_llm.ws.open_simulation(demo, make_spec(demo, "1000", "1000_sample7", "topic-1", "vanilla-log"), llm)
    record = sim.run()
    answers = [r for r in fake.requests if side_of(r) == "assistant"]
    assert answers and all(r.max_tokens == ASSISTANT_TURN_TOKENS for r in answers)
    said = [u.content for u in record.utterances if u.side == "assistant"]
    assert said and all(s.endswith("after dinner.") and "Then you could" not in s for s in said)
    assert all(len(s.split(" ")) <= ASSISTANT_TURN_TOKENS for s in said)
