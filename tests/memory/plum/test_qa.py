"""PLUM's QA augmentation with a scripted LLM: positive, templated closed and negative pairs, the
knowledge-boundary filter, broken-output fallbacks, forget requests, and one training call per session."""

from __future__ import annotations

import pytest

from backends.llm.structured import bounded_schema
from memory.plum.qa import NegativeTopics, PositiveQA, is_discussed
from memory.store import dialogue_stage
from testkit.requests import prompt_text, schema_name, section
from tests.memory.plum.conftest import qa_reply


def qa_items(builder, pos: int):
    sid = builder.user.sessions[pos].sample_id
    return [i for i in builder.store.items_as_of(builder.build_id, dialogue_stage(pos)) if i.session_id == sid]


def test_schemas_are_bounded():
    assert bounded_schema(PositiveQA) and bounded_schema(NegativeTopics)


def test_session_pairs_positive_closed_negative_and_opener(plum_builder, tiny_user):
    builder, fake, trained = plum_builder(tiny_user, qa_reply())
    builder.run(until_session=0)
    s0 = tiny_user.sessions[0]
    items = qa_items(builder, 0)
    metas = [i.meta for i in items]
    assert metas[0]["source"] == "opener" and metas[0]["question"] == f"What did I ask you about on {s0.dialogue_timestamp:%Y-%m-%d}?"
    assert metas[0]["answer"] == f"You said: {s0.turns[0].user.content[:160]}"
    pos = [m for m in metas if m["polarity"] == "positive" and m["source"] != "opener"]
    assert [(m["form"], m["topic"]) for m in pos] == [("open", "brother's maths exam"), ("closed", "brother's maths exam"),
                                                      ("open", "night messages"), ("closed", "night messages")]
    assert pos[1]["question"] == "Did we talk about brother's maths exam?"
    assert pos[1]["answer"] == "Yes. You told me Callum failed a maths module twice."
    neg = [m for m in metas if m["polarity"] == "negative"]
    # balanced: at most as many negative topics as positive ones (2), each closed + open, answers say "not discussed"
    assert [(m["form"], m["topic"]) for m in neg] == [("closed", "holiday in Spain"), ("open", "holiday in Spain"),
                                                      ("closed", "car insurance"), ("open", "car insurance")]
    assert neg[0]["answer"] == "No, we have not talked about holiday in Spain."
    assert neg[1]["answer"] == "Nothing: we have not talked about holiday in Spain."
    assert all(i.layer == "qa" and i.text == f"Q: {i.meta['question']}\nA: {i.meta['answer']}" for i in items)
    assert items[0].provenance == [f"turn:{s0.sample_id}:{t}" for t in range(1, len(s0.turns) + 1)]
    # the negative prompt was told what was discussed and how many to give
    neg_prompt = prompt_text(next(r for r in fake.requests if schema_name(r) == "NegativeTopics"))
    assert section(neg_prompt, "Topics that were discussed") == "- brother's maths exam\n- night messages"
    assert "List up to 2 such topics" in neg_prompt
    # trained once, on exactly the stored pairs, in item order
    assert trained == [(s0.sample_id, [(m["question"], m["answer"]) for m in metas])]
    rows = builder.llm.store.calls("test")
    assert {(r["role"], r["prompt_name"], r["prompt_version"]) for r in rows} == {
        ("memory_builder", "memory/plum_qa", "2"), ("memory_builder", "memory/plum_qa_negative", "2")}
    notes = builder.store.notes(builder.build_id)[dialogue_stage(0)]
    assert any(n.startswith("adapter trained on 9 QA pair(s): 2 steps, loss 2.000 → 1.000") for n in notes)


def test_sessions_train_in_time_order_and_resume_skips_done_ones(plum_builder, tiny_user):
    builder, fake, trained = plum_builder(tiny_user, qa_reply())
    builder.run(until_session=1)
    builder.run()
    assert [sid for sid, _ in trained] == [s.sample_id for s in tiny_user.sessions]
    assert all(prompt_text(r) for r in fake.requests)
    assert builder.store.info(builder.build_id).stages_done == 2 * len(tiny_user.sessions)


def test_negative_topics_that_were_discussed_are_dropped(plum_builder, tiny_user):
    s0 = tiny_user.sessions[0]
    s0.turns[2].user.content = "We are also planning a holiday in Spain next summer."
    builder, _, _ = plum_builder(tiny_user, qa_reply(negatives=["holiday in Spain", "car insurance", "car insurance"]))
    builder.run(until_session=1)
    topics0 = [i.meta["topic"] for i in qa_items(builder, 0) if i.meta["polarity"] == "negative"]
    assert topics0 == ["car insurance", "car insurance"]  # closed + open of the one kept topic
    notes = builder.store.notes(builder.build_id)[dialogue_stage(0)]
    assert "negative topic 'holiday in Spain' dropped: it was discussed" in notes
    # a later session may not claim "never discussed" about what an earlier session's positives cover
    builder2, _, _ = plum_builder(tiny_user, qa_reply(
        positives=[{"topic": "car insurance renewal", "question": "What did I say about car insurance?",
                    "answer": "You said your car insurance renewal is due."}],
        negatives=["car insurance renewal"]), config={"pairs_per_session": 3})
    builder2.run(until_session=1)
    assert not [i for i in qa_items(builder2, 1) if i.meta["polarity"] == "negative"]


def test_is_discussed_uses_word_overlap():
    assert is_discussed("the maths exam", ["He failed the maths exam twice."])
    assert not is_discussed("car insurance", ["He failed the maths exam twice."])


@pytest.mark.parametrize("broken", [{"PositiveQA"}, {"NegativeTopics"}, {"PositiveQA", "NegativeTopics"}])
def test_broken_output_falls_back(plum_builder, tiny_user, broken):
    builder, fake, trained = plum_builder(tiny_user, qa_reply(broken=broken))
    builder.run(until_session=0)
    metas = [i.meta for i in qa_items(builder, 0)]
    assert metas[0]["source"] == "opener"  # always at least the opening-message pair
    notes = builder.store.notes(builder.build_id)[dialogue_stage(0)]
    if "PositiveQA" in broken:
        assert not [m for m in metas if m["source"] == "llm"]
        assert any(n.startswith("QA pairs failed for") and "opening-message pair only" in n for n in notes)
    if "NegativeTopics" in broken:
        assert not [m for m in metas if m["polarity"] == "negative"]
        assert any(n.startswith("negative QA topics failed for") for n in notes)
    else:  # one negative topic at most when there are no positives to balance
        assert len({m["topic"] for m in metas if m["polarity"] == "negative"}) == (1 if "PositiveQA" in broken else 2)
    assert len(fake.requests) == 3 * len(broken) + (2 - len(broken))  # two corrections per broken call
    assert trained and trained[0][1][0] == (metas[0]["question"], metas[0]["answer"])


def test_forget_request_turns_never_become_pairs(plum_builder, tiny_user):
    s0, s1 = tiny_user.sessions[0], tiny_user.sessions[1]
    s0.turns[1].user.content = "My sister Ingrid lives in Oslo and visits every June."
    s1.turns[0].user.content = "Please forget that my sister Ingrid lives in Oslo."

    def positives(prompt):
        if "Ingrid" in prompt:
            return [{"topic": "sister Ingrid in Oslo", "question": "What did I tell you about my sister Ingrid?",
                     "answer": "Your sister Ingrid lives in Oslo."}]
        return [{"topic": "sleep", "question": "What did I say about sleep?", "answer": "You sleep badly."},
                {"topic": "sister Ingrid Oslo", "question": "Where does Ingrid live?", "answer": "Ingrid lives in Oslo."}]

    builder, fake, trained = plum_builder(tiny_user, qa_reply(positives=positives))
    builder.run(until_session=1)
    assert any("Ingrid" in i.text for i in qa_items(builder, 0))
    s1_prompts = [prompt_text(r) for r in fake.requests if f"{s1.dialogue_timestamp:%Y-%m-%d}" in prompt_text(r)]
    assert s1_prompts and not any("forget" in p.lower() and "Ingrid" in p for p in s1_prompts)
    after = builder.store.items_as_of(builder.build_id, dialogue_stage(1))
    assert not any("Ingrid" in i.text for i in after)  # the new pair dropped, the old pairs deleted
    s1_items = qa_items(builder, 1)
    assert s1_items[0].meta["source"] == "opener" and "forget" not in s1_items[0].text.lower()
    assert all(f"turn:{s1.sample_id}:1" not in i.provenance for i in s1_items)
    assert not any("Ingrid" in q + a for q, a in trained[1][1])
    notes = builder.store.notes(builder.build_id)[dialogue_stage(1)]
    assert any(n.startswith("forget request: 2 QA pair(s) not kept") for n in notes)
    assert any(n.startswith("forget request (turn 1)") for n in notes)


def test_retrieve_says_the_memory_is_in_the_weights(plum_builder, demo_user):
    builder, _, _ = plum_builder(demo_user, qa_reply())
    trace = builder.retrieve("What should I cook?", "solution", demo_user.sessions[0])
    assert trace.items == [] and "No adapter trained yet" in trace.context
    assert builder.impl.uses_query is False
