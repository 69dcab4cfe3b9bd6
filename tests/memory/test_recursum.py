"""RecurSum: a running log summary and a running dialogue summary, rewritten every session."""

from __future__ import annotations

import json
import re

from testkit.requests import prompt_text, schema_name, section


def summariser(fail: set[tuple[str, str]] = frozenset(), copy_user: bool = True):
    """A fake LLM that keeps the previous summary's lines and adds one line per session (plus real user
    sentences); it returns garbage for (schema, session date) pairs in ``fail``."""

    def reply(req) -> str:
        name, prompt = schema_name(req), prompt_text(req)
        date = re.search(r"session of (\d{4}-\d{2}-\d{2})", prompt).group(1)
        if (name, date) in fail:
            return "sorry, I cannot do that"
        title = "Previous log summary" if name == "LogSummary" else "Previous dialogue summary"
        prev = section(prompt, title)
        lines = [] if prev.startswith("No previous") else prev.splitlines()
        lines.append(f"- {'Logs' if name == 'LogSummary' else 'Dialogue'} of {date}.")
        for line in section(prompt, "New dialogue (session of " + date + ")").splitlines():
            if copy_user and line.startswith("user: ") and "says something" not in line:
                lines.append(f"- {line[6:]}")
        return json.dumps({"summary": "\n".join(lines)})

    return reply


def texts(builder, stage: int) -> dict[str, str]:
    return {i.layer: i.text for i in builder.store.items_as_of(builder.build_id, stage)}


def test_summaries_are_rewritten_every_session(build_memory, tiny_user):
    builder, fake = build_memory("recursum", tiny_user, summariser())
    builder.run()
    uid = tiny_user.uid
    assert len(fake.requests) == 2 * len(tiny_user.sessions)
    after = [texts(builder, s) for s in range(builder.total_stages)]
    assert after[0] == {"log_summary": "- Logs of 2024-03-22."}
    assert set(after[1]) == {"log_summary", "summary"}
    # each session rewrites both summaries, so the snapshots differ session to session
    assert len({a["summary"] for a in after[1::2]}) == len(tiny_user.sessions)
    assert len({a["log_summary"] for a in after[0::2]}) == len(tiny_user.sessions)
    assert after[-1]["summary"].count("- Dialogue of") == 4
    items = {i.id: i for i in builder.store.items_as_of(builder.build_id, 3)}
    summary = items[f"{uid}_summary"]
    assert summary.session_id == tiny_user.sessions[1].sample_id
    assert f"turn:{tiny_user.sessions[1].sample_id}:1" in summary.provenance
    assert f"item:{uid}_summary" in summary.provenance
    assert not any(p.startswith(f"turn:{tiny_user.sessions[0].sample_id}:") for p in summary.provenance)
    assert items[f"{uid}_log_summary"].provenance[0] == f"log:{tiny_user.sessions[1].sample_id}:0"


def test_llm_sees_the_previous_summary(build_memory, tiny_user):
    builder, fake = build_memory("recursum", tiny_user, summariser())
    builder.run(until_session=1)
    first_dialogue, second_dialogue = [prompt_text(r) for r in fake.requests if schema_name(r) == "DialogueSummary"]
    assert "No previous summary." in first_dialogue
    assert section(second_dialogue, "Previous dialogue summary") == texts(builder, 1)["summary"]
    second_logs = [prompt_text(r) for r in fake.requests if schema_name(r) == "LogSummary"][1]
    assert section(second_logs, "Previous log summary") == texts(builder, 0)["log_summary"]
    assert all(r.messages[-1].content for r in fake.requests)
    rows = builder.llm.store.calls("test")
    assert {(r["role"], r["prompt_name"], r["prompt_version"]) for r in rows} == {
        ("memory_builder", "memory/recursum_log_summary", "2"), ("memory_builder", "memory/recursum_dialogue_summary", "2")}


def test_invalid_output_keeps_the_previous_summary_and_notes_it(build_memory, tiny_user):
    builder, fake = build_memory("recursum", tiny_user, summariser({("DialogueSummary", "2024-06-12"),
                                                                    ("LogSummary", "2024-09-02")}))
    builder.run()
    assert texts(builder, 3)["summary"] == texts(builder, 1)["summary"]
    assert texts(builder, 3)["log_summary"] != texts(builder, 1)["log_summary"]
    assert texts(builder, 4)["log_summary"] == texts(builder, 2)["log_summary"]
    notes = builder.store.notes(builder.build_id)
    assert any("dialogue summary update failed" in n and "kept the previous summary" in n for n in notes[3])
    assert any("log summary update failed" in n for n in notes[4])
    assert notes[1] == []
    # the next session builds on the kept summary
    assert "- Dialogue of 2024-09-02." in texts(builder, 5)["summary"]


def test_forget_request_removes_the_fact(build_memory, tiny_user):
    s0, s2 = tiny_user.sessions[0], tiny_user.sessions[2]
    s0.turns[0].user.content = "I have a peanut allergy, so keep nuts away."
    s2.turns[1].user.content = "Please forget that I have a peanut allergy."
    builder, fake = build_memory("recursum", tiny_user, summariser())
    builder.run()
    assert "peanut allergy" in texts(builder, 3)["summary"]
    prompt = [prompt_text(r) for r in fake.requests if schema_name(r) == "DialogueSummary"][2]
    assert "I have a peanut allergy" in section(prompt, "Forget requests")
    assert "Please forget" not in prompt  # the request turn itself is not summarised
    for stage in (5, 6, 7):
        assert "peanut" not in texts(builder, stage)["summary"]
        assert "- Dialogue of 2024-03-22." in texts(builder, stage)["summary"]  # the rest is kept
    notes = builder.store.notes(builder.build_id)[5]
    assert any(n.startswith("forget request: dropped 1 sentence(s)") for n in notes)


def test_retrieve_on_demo_user(build_memory, demo_user):
    builder, _ = build_memory("recursum", demo_user, summariser(copy_user=False), dataset="demo")
    current = demo_user.sessions[7]
    trace = builder.retrieve("Any ideas for my week?", "requirement", current=current)
    assert [b.title for b in trace.blocks] == ["Summary of earlier dialogues", "Summary of the user's logs",
                                               "Logs of the current session"]
    assert "- Dialogue of 2024-11-30." in trace.blocks[0].text
    assert "2024-12-14" not in trace.blocks[0].text  # nothing of the current dialogue
    assert {r.item.layer for r in trace.items} == {"summary", "log_summary"}
    assert trace.as_of_session == current.sample_id
    assert 0 < trace.tokens < trace.full_history_tokens
    before = builder.store.items_as_of(builder.build_id, builder.latest_stage())
    builder.retrieve("again", "solution", current=current)
    assert builder.store.items_as_of(builder.build_id, builder.latest_stage()) == before
