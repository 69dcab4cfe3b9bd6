"""MemoryBank: dated event summaries on a forgetting curve, an evolving portrait, similarity × retention."""

from __future__ import annotations

import json
import math
import re

import pytest

from testkit.requests import prompt_text, schema_name, section


def bank_llm(events: dict[str, str] | None = None, fail: set[tuple[str, str]] = frozenset(), copy_user: bool = True):
    """Fake LLM: event summaries from ``events`` (by date) or a default, portraits that keep the previous lines and
    add one per session (plus the user's real sentences); garbage for (schema, date) pairs in ``fail``."""
    events = events or {}

    def reply(req) -> str:
        name, prompt = schema_name(req), prompt_text(req)
        date = re.search(r"(?:Date: |session of )(\d{4}-\d{2}-\d{2})", prompt).group(1)
        if (name, date) in fail:
            return "{broken"
        said = [line[6:] for line in prompt.splitlines()
                if copy_user and line.startswith("user: ") and "says something" not in line]
        if name == "EventSummary":
            return json.dumps({"summary": " ".join([events.get(date, f"On {date} the user asked for help."), *said])})
        prev = section(prompt, "Previous portrait")
        lines = [] if prev.startswith("No portrait") else prev.splitlines()
        lines += [f"- Seen on {date}.", *(f"- {s}" for s in said)]
        return json.dumps({"portrait": "\n".join(lines)})

    return reply


def items(builder, stage: int) -> dict:
    return {i.id: i for i in builder.store.items_as_of(builder.build_id, stage)}


def test_event_per_session_portrait_rewritten_and_old_events_fade(build_memory, tiny_user):
    builder, fake = build_memory("memorybank", tiny_user, bank_llm())
    builder.run()
    uid, ids = tiny_user.uid, [s.sample_id for s in tiny_user.sessions]
    assert builder.config["decay_days"] == 30 and builder.config["forget_threshold"] == 0.05
    assert items(builder, 0) == {}  # nothing at the logs stage
    first = items(builder, 1)
    assert set(first) == {f"{ids[0]}_event", f"{uid}_portrait"}
    event = first[f"{ids[0]}_event"]
    assert event.layer == "event" and event.text == "On 2024-03-22 the user asked for help."
    assert event.meta == {"date": "2024-03-22", "strength": 1.0, "last_recall": "2024-03-22"}
    assert f"log:{ids[0]}:0" in event.provenance and f"turn:{ids[0]}:8" in event.provenance
    portraits = [items(builder, s)[f"{uid}_portrait"].text for s in (1, 3, 5, 7)]
    assert len(set(portraits)) == 4 and portraits[-1].count("- Seen on") == 4
    assert "- Seen on 2024-03-22." in section(prompt_text(fake.requests[3]), "Previous portrait")
    # sessions are 82 days apart: retention exp(-82/30) = 0.065 survives, exp(-164/30) = 0.004 does not
    assert f"{ids[0]}_event" in items(builder, 3)
    assert f"{ids[0]}_event" in items(builder, 4)  # forgetting happens when the dialogue is ingested
    assert f"{ids[0]}_event" not in items(builder, 5) and f"{ids[1]}_event" in items(builder, 5)
    assert [i for i in items(builder, 7) if i.endswith("_event")] == [f"{ids[2]}_event", f"{ids[3]}_event"]
    notes = builder.store.notes(builder.build_id)
    assert any(n.startswith(f"forgetting curve: event {ids[0]}_event") and "0.004" in n for n in notes[5])
    assert not any("forgetting" in n for n in notes[3])


def test_slower_decay_keeps_every_event(build_memory, tiny_user):
    builder, _ = build_memory("memorybank", tiny_user, bank_llm(), config={"decay_days": 200})
    builder.run()
    assert sum(i.endswith("_event") for i in items(builder, 7)) == 4
    r = builder.impl.retention(items(builder, 7)[f"{tiny_user.sessions[0].sample_id}_event"],
                               tiny_user.sessions[3].dialogue_timestamp.date())
    assert r == pytest.approx(math.exp(-246 / 200))


EVENTS = {"2024-03-22": "hiking mountains trail weekend", "2024-06-12": "budget spreadsheet savings plan",
          "2024-09-02": "hiking mountains budget savings"}


def test_ranking_is_similarity_times_retention(build_memory, tiny_user):
    query, current = "hiking mountains trail weekend", tiny_user.sessions[3]
    ids = [s.sample_id for s in tiny_user.sessions]
    builder, _ = build_memory("memorybank", tiny_user, bank_llm(EVENTS, copy_user=False),
                              config={"decay_days": 100, "forget_threshold": 0.0})
    trace = builder.retrieve(query, "requirement", current=current)
    events = [r for r in trace.items if r.item.layer == "event"]
    # the fresh half-matching event beats the exact but old one
    assert [r.item.session_id for r in events] == [ids[2], ids[0], ids[1]]
    when = current.dialogue_timestamp.date()
    hits = dict(builder.index.search("event", query, 5, builder.latest_stage()))
    for r in events:
        assert r.score == pytest.approx(hits[r.item.id] * builder.impl.retention(r.item, when))
    assert hits[f"{ids[0]}_event"] > hits[f"{ids[2]}_event"]
    assert "- [2024-09-02] hiking mountains budget savings" in trace.blocks[1].text

    # with (almost) no decay the ranking is by similarity
    builder, _ = build_memory("memorybank", tiny_user, bank_llm(EVENTS, copy_user=False),
                              config={"decay_days": 10**7, "forget_threshold": 0.0, "k": 2})
    trace = builder.retrieve(query, "requirement", current=current)
    assert [r.item.session_id for r in trace.items if r.item.layer == "event"] == [ids[0], ids[2]]


def test_retrieve_writes_nothing_and_sees_only_earlier_events(build_memory, tiny_user):
    builder, _ = build_memory("memorybank", tiny_user, bank_llm(), config={"decay_days": 1000})
    builder.run()
    stage = builder.latest_stage()
    before = builder.store.items_as_of(builder.build_id, stage)
    trace = builder.retrieve("help", "requirement", current=tiny_user.sessions[2])
    assert {r.item.session_index for r in trace.items if r.item.layer == "event"} == {0, 1}
    builder.retrieve("help", "solution")
    assert builder.store.items_as_of(builder.build_id, stage) == before
    assert builder.latest_stage() == stage


def test_invalid_output_keeps_memory_and_notes_it(build_memory, tiny_user):
    fail = {("EventSummary", "2024-06-12"), ("UserPortrait", "2024-09-02")}
    builder, _ = build_memory("memorybank", tiny_user, bank_llm(fail=fail), config={"decay_days": 1000})
    builder.run()
    ids = [s.sample_id for s in tiny_user.sessions]
    assert f"{ids[1]}_event" not in items(builder, 7) and f"{ids[2]}_event" in items(builder, 7)
    portrait = f"{tiny_user.uid}_portrait"
    assert items(builder, 5)[portrait] == items(builder, 3)[portrait]
    notes = builder.store.notes(builder.build_id)
    assert any(n.startswith(f"event summary failed for {ids[1]}") for n in notes[3])
    assert any(n.startswith(f"portrait update failed for {ids[2]}") and "kept the previous portrait" in n
               for n in notes[5])
    assert "- Seen on 2024-11-23." in items(builder, 7)[portrait].text


def test_forget_request_removes_the_fact(build_memory, tiny_user):
    s0, s2 = tiny_user.sessions[0], tiny_user.sessions[2]
    s0.turns[0].user.content = "I have a peanut allergy, so keep nuts away."
    s2.turns[1].user.content = "Please forget that I have a peanut allergy."
    builder, fake = build_memory("memorybank", tiny_user, bank_llm(), config={"decay_days": 1000})
    builder.run()
    portrait = f"{tiny_user.uid}_portrait"
    assert "peanut" in items(builder, 3)[portrait].text and f"{s0.sample_id}_event" in items(builder, 3)
    portrait_prompt = [prompt_text(r) for r in fake.requests if schema_name(r) == "UserPortrait"][2]
    assert "I have a peanut allergy" in section(portrait_prompt, "Forget requests")
    after = items(builder, 5)
    assert f"{s0.sample_id}_event" not in after  # the event that carried it is gone
    assert f"{tiny_user.sessions[1].sample_id}_event" in after
    assert "peanut" not in after[portrait].text and "- Seen on 2024-03-22." in after[portrait].text
    assert not any("peanut" in i.text for i in items(builder, 7).values())


def test_retrieve_on_demo_user(build_memory, demo_user):
    builder, _ = build_memory("memorybank", demo_user, bank_llm(copy_user=False), dataset="demo")
    current = demo_user.sessions[7]
    trace = builder.retrieve("Any ideas to sleep better after night shifts?", "requirement", current=current)
    assert [b.title for b in trace.blocks] == ["User portrait", "Related past events", "Logs of the current session"]
    events = [r for r in trace.items if r.item.layer == "event"]
    assert 1 <= len(events) <= 3 and all(r.item.session_index < current.index for r in events)
    assert trace.blocks[1].text.startswith("- [2024-")
    assert 0 < trace.tokens < trace.full_history_tokens
