"""PersonaMem-v2: typed loading (real sample from ../shared), pseudo-sessions, seeded option shuffling,
MCQ and open-ended answering with a scripted LLM, the accuracy report and `pal personamem`."""

import json
import re
from pathlib import Path

import pytest

from backends.embeddings import HashEmbedder
from backends.vectorstore import BruteForceStore
from cli import personamem_cmds
from cli.main import main
from evaluation.personamem.evaluate import LETTERS, PersonaMemEval, accuracy_report, report_table, shuffle_options
from evaluation.personamem.loader import (
    ASSISTANT_ACT,
    USER_ACT,
    ChatHistory,
    PersonaMemError,
    QuestionItem,
    history_key,
    history_user,
    load_history,
    load_persona,
    load_questions,
)
from memory.base import forget_requests
from memory.build import MemoryBuilder
from testkit.workspace import make_workspace

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "personamem"
PROFILE, HISTORY, QUESTIONS = (SHARED / n for n in ("persona0_profile.json", "persona0_chat_history_32k_head.json",
                                                    "persona0_qa_items.json"))
needs_sample = pytest.mark.skipif(not QUESTIONS.is_file(), reason=f"PersonaMem sample not found at {SHARED}")


def item(k: int, **kw) -> QuestionItem:
    base = {"item_id": f"it{k}", "preference": f"likes thing {k}", "pref_type": "neutral_preferences", "who": "self",
            "user_query": f"question {k}?", "correct_answer": f"GOLD {k}",
            "incorrect_answers": [f"WRONG {k} a", f"WRONG {k} b", f"WRONG {k} c"]}
    return QuestionItem.model_validate({**base, **kw})


ITEMS = [item(0), item(1, pref_type="ask_to_forget", updated=True, prev_pref="likes dancing",
                       preference="Do not remember 'likes dancing' in memory"),
         item(2, pref_type="sensitive_info", sensitive_info="phone_number: +1-202-845-3917"),
         item(3, who="others", pref_type="anti_stereotypical_pref"), item(4, updated=True, prev_pref="likes pizza")]


def _user_text(req) -> str:
    return next(m.content for m in req.messages if m.role == "user")


def picker(choose=lambda text, opts: "GOLD", invalid=False):
    """Scripted assistant + judge. ``choose(prompt, options)`` returns a substring of the option to pick."""
    def reply(req):
        text = _user_text(req)
        if invalid:
            return "not json at all"
        if "# The reply to grade" in text:
            graded = text.split("# The reply to grade", 1)[1]
            return json.dumps({"reason": "r", "score": 1 if "GOLD" in graded else 0})
        if "# Candidate replies" in text:
            opts = dict(re.findall(r"^([ABCD])\. (.*)$", text, re.M))
            want = choose(text, opts)
            letter = next(k for k, v in opts.items() if want in v)
            return json.dumps({"reason": "because", "answer": letter})
        q = re.search(r"question (\d+)\?", text).group(1)
        return json.dumps({"answer": choose(text, {}).replace("GOLD", f"GOLD {q}")})
    return reply


# ---------------------------------------------------------------- loading


@needs_sample
def test_loads_the_real_sample():
    persona = load_persona(PROFILE)
    assert persona.name == "Amara Nwosu" and persona.preference_updates and "phone_number" in persona.sensitive_information
    history = load_history(HISTORY)
    assert history.metadata.persona_id == 0 and history.chat_history[0].role == "system"
    items = load_questions(QUESTIONS)
    assert len(items) == 8 and all(i.evaluable for i in items) and len({i.item_id for i in items}) == 8
    by_type = {i.pref_type: i for i in items}
    assert {"ask_to_forget", "sensitive_info", "stereotypical_pref", "anti_stereotypical_pref"} <= set(by_type)
    forget = by_type["ask_to_forget"]
    assert forget.updated and forget.forgotten == "Participates in cultural dance workshops"
    assert by_type["sensitive_info"].sensitive_value == "D39284715029"
    assert {i.who for i in items} == {"self", "others"}
    assert any(i.updated and i.prev_pref == "Loves homemade pizza nights" for i in items)
    assert all(len(i.incorrect_answers) == 3 for i in items)


@needs_sample
def test_real_history_becomes_sessions_with_forget_turns():
    user = history_user(load_history(HISTORY), exchanges_per_session=4)
    assert user.uid == "pm0" and user.language == "en"
    turns = [t for s in user.sessions for t in s.turns]
    assert all(not s.logs and s.split == "history" for s in user.sessions)
    assert sum(len(s.turns) for s in user.sessions) == len(turns) and len(user.sessions[0].turns) == 4
    assert not any("You are an AI assistant" in t.user.content for t in turns)  # system message dropped
    assert sum(1 for s in user.sessions for _ in forget_requests(s)) >= 2
    assert all(t.assistant.content == "" for t in turns if t.user.content.startswith("Please forget"))


def test_loader_errors_name_file_and_field(tmp_path):
    bad = tmp_path / "h.json"
    bad.write_text(json.dumps({"chat_history": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]}))
    with pytest.raises(PersonaMemError, match=r"h\.json: chat_history\[1\]\.role"):
        load_history(bad)
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"items": [{"item": {"user_query": "q", "correct_answer": "c", "incorrect_answers": ["a"]}}]}))
    with pytest.raises(PersonaMemError, match=r"q\.json: items\[0\]\.item.*exactly 3"):
        load_questions(q)
    q.write_text(json.dumps([{"user_query": "q", "who": "nobody"}]))
    with pytest.raises(PersonaMemError, match=r"q\.json: \[0\]\.who"):
        load_questions(q)
    with pytest.raises(PersonaMemError, match="no such file"):
        load_persona(tmp_path / "missing.json")


def test_loader_tolerates_missing_fields_and_other_layouts(tmp_path):
    q = tmp_path / "p.json"
    q.write_text(json.dumps({"conversations": {"translation": [
        {"preference": "x", "conversations": []},  # plants information only: no query
        {"user_query": "{'role': 'user', 'content': 'What now?'}", "correct_answer": "c",
         "incorrect_answers": ["a", "b", "d"], "sensitive_info": "email_address: a@b.co"}]}}))
    planted, asked = load_questions(q)
    assert not planted.evaluable and asked.evaluable and asked.user_query == "What now?"
    assert asked.pref_type == "sensitive_info" and asked.ownership == "unknown" and asked.dynamics == "static"
    assert asked.conversation_scenario == "translation"


def test_pseudo_sessions_pair_turns_and_chunk():
    h = ChatHistory.model_validate({"chat_history": [
        {"role": "system", "content": "persona"}, {"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "Please forget that I like jazz."}, {"role": "user", "content": "u3"},
        {"role": "assistant", "content": "a3"}, {"role": "assistant", "content": "a3b"},
        {"role": "user", "content": "u4"}, {"role": "assistant", "content": "a4"}, {"role": "user", "content": "u5"}]})
    user = history_user(h, uid="p_7", exchanges_per_session=2)
    assert user.uid == "p-7" and [s.sample_id for s in user.sessions] == ["p-7_sample0", "p-7_sample1", "p-7_sample2"]
    assert [len(s.turns) for s in user.sessions] == [2, 2, 1]
    s0, s1 = user.sessions[0], user.sessions[1]
    assert (s0.turns[0].user.content, s0.turns[0].assistant.content) == ("u1", "a1")
    assert s0.turns[1].assistant.content == "" and forget_requests(s0)[0].target.startswith("I like jazz")
    assert s1.turns[0].assistant.content == "a3\n\na3b"
    assert s0.turns[0].user.action is USER_ACT and s0.turns[0].assistant.action is ASSISTANT_ACT
    assert s0.dialogue_timestamp < s1.dialogue_timestamp and all(not s.logs and not s.topics for s in user.sessions)
    assert history_key(h, 2) == history_key(h, 2) != history_key(h, 3)


# ---------------------------------------------------------------- shuffling


def test_option_shuffling_is_reproducible_and_tracks_gold():
    it = ITEMS[0]
    first = shuffle_options(it, seed=5)
    assert shuffle_options(it, seed=5) == first
    options, kinds, gold, s = first
    assert options[LETTERS.index(gold)] == it.correct_answer and kinds[LETTERS.index(gold)] == "gold"
    assert sorted(options) == sorted([it.correct_answer, *it.incorrect_answers])
    golds = {shuffle_options(item(k), seed=0)[2] for k in range(40)}
    assert len(golds) > 1  # the gold is not always in one slot
    assert any(shuffle_options(it, seed=n)[0] != options for n in range(10))


# ---------------------------------------------------------------- answering


@pytest.fixture
def builder(env, tmp_path):
    make_llm, _, ws = env
    h = ChatHistory.model_validate({"chat_history": [
        {"role": "user", "content": "I love dancing and pizza."}, {"role": "assistant", "content": "Noted!"},
        {"role": "user", "content": "Please forget that I love dancing."},
        {"role": "user", "content": "I play chess on Sundays."}, {"role": "assistant", "content": "Nice."}]})
    emb = HashEmbedder()
    b = MemoryBuilder(history_key(h, 1), history_user(h, exchanges_per_session=1), "full-history", ws.memory,
                      BruteForceStore(emb), emb)
    b.run()
    return b


def run_eval(env, builder, reply, items=ITEMS, seed=3, forms=("mcq", "open")):
    make_llm, _, _ = env
    llm, fake = make_llm(reply)
    return PersonaMemEval(llm, builder, "full-history", seed=seed).run(items, forms), fake


def test_gold_picker_scores_100_percent_and_records_everything(env, builder):
    records, fake = run_eval(env, builder, picker())
    assert len(records) == 2 * len(ITEMS) and all(r.ok and r.correct for r in records)
    mcq = next(r for r in records if r.form == "mcq")
    assert mcq.seed == 3 and mcq.item_seed and len(mcq.options) == 4 and mcq.answer == mcq.gold_letter
    assert mcq.options[LETTERS.index(mcq.gold_letter)] == ITEMS[0].correct_answer
    assert mcq.prompt_name == "eval/personamem_mcq" and mcq.prompt_version and mcq.model and mcq.raw
    prompt = _user_text(fake.requests[0])
    assert "chess on Sundays" in prompt and "dancing" not in prompt  # memory reached the prompt, forget honoured
    op = next(r for r in records if r.form == "open")
    assert op.score == 1 and op.judge_ok and op.judge_prompt_name == "eval/personamem_judge" and op.judge_raw
    assert op.judge_model and op.answer.startswith("GOLD")
    rows = accuracy_report(records)
    assert all(r["accuracy"] == 1.0 and r["invalid"] == 0 for r in rows)


def test_distractor_picker_fails_on_forget_items(env, builder):
    forget_id = ITEMS[1].item_id

    def choose(text, opts):
        return "WRONG" if "question 1?" in text else "GOLD"
    records, fake = run_eval(env, builder, picker(choose))
    for r in records:
        assert r.correct == (r.item_id != forget_id), r
    judge_msg = next(_user_text(q) for q in fake.requests if "# The reply to grade" in _user_text(q)
                     and "question 1?" in _user_text(q))
    assert "likes dancing" in judge_msg  # the rubric names what must be avoided
    assert "WRONG" not in judge_msg.split("# The reply to grade")[0]  # never the wrong options, as the released judge
    rows = {(r["form"], r["group"], r["value"]): r for r in accuracy_report(records)}
    for form in ("mcq", "open"):
        assert rows[(form, "pref_type", "ask_to_forget")]["accuracy"] == 0.0
        assert rows[(form, "overall", "all")]["correct"] == 4 and rows[(form, "overall", "all")]["n"] == 5
        assert rows[(form, "dynamics", "updated")] == {"form": form, "group": "dynamics", "value": "updated",
                                                            "n": 2, "correct": 1, "invalid": 0, "judge_failed": 0,
                                                            "accuracy": 0.5}
        assert rows[(form, "dynamics", "static")]["accuracy"] == 1.0
        assert rows[(form, "who", "others")]["n"] == 1 and rows[(form, "who", "self")]["correct"] == 3


def test_invalid_outputs_are_recorded_not_raised(env, builder):
    records, _ = run_eval(env, builder, picker(invalid=True), items=ITEMS[:2])
    assert len(records) == 4 and all(not r.ok and not r.correct and len(r.raw) == 3 and r.errors for r in records)
    assert all(r.answer is None and r.judge_ok is None for r in records)
    rows = accuracy_report(records)
    assert all(r["invalid"] == r["n"] and r["accuracy"] == 0 for r in rows)
    assert "MCQ" in report_table(rows)


def test_a_judge_failure_is_kept_out_of_the_accuracy_and_counted(env, builder):
    """Version 3: the method answered; the judge gave no valid verdict — not the method's fault. The item leaves the
    open-ended accuracy (and the mean) and is counted in judge_failed; the answer is not invalid."""
    def reply(req):
        text = _user_text(req)
        if "# The reply to grade" in text and "question 0?" in text:
            return json.dumps({"reason": "r", "score": 0.5})  # not 0/1: invalid every time
        return picker()(req)
    records, _ = run_eval(env, builder, reply, items=ITEMS[:2], forms=("open",))
    failed, judged = records
    assert failed.ok and failed.judge_ok is False and failed.score is None and len(failed.judge_raw) == 3
    (row,) = [r for r in accuracy_report(records) if r["group"] == "overall"]
    assert (row["n"], row["invalid"], row["judge_failed"], row["correct"], row["accuracy"]) == (2, 0, 1, 1, 1.0)
    (only,) = [r for r in accuracy_report([failed]) if r["group"] == "overall"]
    assert only["accuracy"] is None and "n/a" in report_table(accuracy_report([failed]))
    assert "left out of acc" in report_table(accuracy_report(records))


def test_the_judge_sees_the_last_five_messages_as_released(env, builder):
    from evaluation.personamem.evaluate import judge_context

    messages = [("user", f"message {i}") for i in range(8)]
    context = judge_context(messages)
    assert context.splitlines() == [f"user: message {i}" for i in range(3, 8)]
    assert judge_context([]) == "(no history)" and "[PHONE]" in judge_context([("user", "call me on +1 415 555 0100")])
    make_llm, _, _ = env
    llm, fake = make_llm(picker())
    PersonaMemEval(llm, builder, "full-history", context=context).run(ITEMS[:1], ("open",))
    judge_msg = next(_user_text(q) for q in fake.requests if "# The reply to grade" in _user_text(q))
    assert "user: message 7" in judge_msg and "message 2" not in judge_msg


def test_several_judge_models_average_by_default(env, builder):
    from evaluation.personamem.evaluate import Judging

    judging = Judging.for_models(["judge-a", "judge-b", "judge-c"], judges=None, aggregate=None, scale="binary")
    assert (judging.judges, judging.aggregate) == (3, "mean")
    assert Judging.for_models(["only"], judges=None, aggregate=None).judges == 1
    assert Judging.for_models(["a", "b"], judges=None, aggregate="majority").aggregate == "majority"
    make_llm, _, _ = env
    llm, fake = make_llm(judges_reply([1, 0, 1]))
    (r,) = PersonaMemEval(llm, builder, "full-history", judging=judging).run(ITEMS[:1], ("open",))
    judged = [q for q in fake.requests if "# The reply to grade" in _user_text(q)]
    assert [q.model for q in judged] == ["judge-a", "judge-b", "judge-c"]
    assert r.judge_models == ["judge-a", "judge-b", "judge-c"] and r.score == pytest.approx(2 / 3) and r.correct


# ---------------------------------------------------------------- command


@needs_sample
def test_pal_personamem_on_the_sample(env, monkeypatch, capsys, tmp_path):
    make_llm, _, ws = env
    monkeypatch.setattr(personamem_cmds, "make_llm", lambda: make_llm(picker(lambda text, opts: ""))[0])

    def fake_builder(dataset, user, method, llm):
        emb = HashEmbedder()
        return MemoryBuilder(dataset, user, method, ws.memory, BruteForceStore(emb), emb, llm=llm)
    monkeypatch.setattr(personamem_cmds, "make_builder", fake_builder)
    out_file = tmp_path / "records.jsonl"
    argv = ["personamem", "--persona", str(PROFILE), "--history", str(HISTORY), "--questions", str(QUESTIONS),
            "--method", "full-history", "--limit", "3", "--forms", "mcq", "--seed", "1", "--json",
            "--records", str(out_file)]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    overall = next(r for r in rows if r["group"] == "overall")
    assert overall["n"] == 3 and {r["form"] for r in rows} == {"mcq"}
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert len(lines) == 3 and all(x["seed"] == 1 and len(x["options"]) == 4 for x in lines)
    bad = ["personamem", "--persona", str(PROFILE), "--history", str(HISTORY), "--questions", str(QUESTIONS)]
    assert main([*bad, "--method", "nope"]) == 2


def test_records_are_stored_per_method_and_reported_for_the_page(tmp_path):
    from evaluation.personamem.evaluate import PMRecord, accuracy_by_method

    store = make_workspace(tmp_path).personamem
    save_records, stored_records = store.save, store.records

    def rec(item, method, correct, form="mcq"):
        return PMRecord(item_id=item, form=form, method=method, pref_type="ask_to_forget", who="self",
                        dynamics="static", query="q", model="m", prompt_name="p", prompt_version="1", ok=True,
                        correct=correct)

    assert save_records([rec("i1", "rag-turn", True), rec("i2", "rag-turn", False)], "h1") == 2
    save_records([rec("i1", "rag-turn", True)], "h1")  # replaced, not duplicated
    save_records([rec("i1", "vanilla", False)], "h1")
    assert len(stored_records()) == 3 and len(stored_records("vanilla")) == 1
    rows = accuracy_by_method(stored_records())
    overall = {(r["method"], r["form"]): r for r in rows if r["group"] == "overall"}
    assert overall[("rag-turn", "mcq")]["accuracy"] == 0.5 and overall[("vanilla", "mcq")]["accuracy"] == 0.0


# ---------------------------------------------------------------- three judges, 0–1 scale, scenarios


def judges_reply(scores):
    """Judge calls answer the given scores in turn (per item); the assistant answers the gold."""
    calls = {}

    def reply(req):
        text = _user_text(req)
        if "# The reply to grade" in text:
            n = calls[text] = calls.get(text, -1) + 1
            return json.dumps({"reason": f"judge {n}", "score": scores[n % len(scores)]})
        return picker()(req)
    return reply


@pytest.mark.parametrize("aggregate,scores,score,correct", [
    ("mean", [1.0, 0.5, 0.0], 0.5, True), ("mean", [0.2, 0.3, 0.4], pytest.approx(0.3), False),
    ("majority", [1.0, 0.0, 1.0], 1.0, True), ("majority", [0.9, 0.1, 0.2], 0.0, False)])
def test_three_judges_combine_by_mean_or_majority_on_the_0_1_scale(env, builder, aggregate, scores, score, correct):
    from evaluation.personamem.evaluate import Judging

    make_llm, _, _ = env
    llm, fake = make_llm(judges_reply(scores))
    judging = Judging(judges=3, aggregate=aggregate, scale="continuous")
    (r,) = PersonaMemEval(llm, builder, "full-history", judging=judging).run(ITEMS[:1], ("open",))
    assert r.judge_ok and r.judge_scores == scores and r.score == score and r.correct is correct
    assert (r.judges, r.judge_aggregate, r.scale) == (3, aggregate, "continuous")
    assert r.judge_prompt_name == "eval/personamem_judge_scored" and r.metric_version == "3"
    assert sum("# The reply to grade" in _user_text(q) for q in fake.requests) == 3
    (row,) = [x for x in accuracy_report([r]) if x["group"] == "overall"]
    assert row["mean_score"] == score and row["correct"] == int(correct)
    assert "mean 0–1 score" in report_table(accuracy_report([r]))


def test_default_judging_stays_one_binary_judge(env, builder):
    from evaluation.personamem.evaluate import combine

    records, fake = run_eval(env, builder, picker(), items=ITEMS[:1], forms=("open",))
    (r,) = records
    assert r.judges == 1 and r.scale == "binary" and r.score == 1 and r.judge_scores == [1.0]
    assert "mean_score" not in accuracy_report(records)[0]
    assert combine([1.0, 0.0], "majority") == (0.0, False)  # an even split is not a majority


def test_accuracy_is_broken_down_by_conversation_scenario(env, builder):
    items = [item(0, conversation_scenario="translation"), item(1, conversation_scenario="translation"),
             item(2, conversation_scenario="personal_email")]

    def choose(text, opts):
        return "WRONG" if "question 1?" in text else "GOLD"
    records, _ = run_eval(env, builder, picker(choose), items=items, forms=("mcq",))
    rows = {(r["group"], r["value"]): r for r in accuracy_report(records)}
    assert rows[("scenario", "translation")]["accuracy"] == 0.5 and rows[("scenario", "translation")]["n"] == 2
    assert rows[("scenario", "personal_email")]["accuracy"] == 1.0
    assert {r["value"] for r in accuracy_report(run_eval(env, builder, picker(), items=ITEMS[:1])[0])
            if r["group"] == "scenario"} == {"unknown"}
