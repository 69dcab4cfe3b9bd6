"""Agentic memory: one memory rewritten after every chunk of the history, with per-chunk snapshots."""

from __future__ import annotations

import json
import re

from memory.methods.agentic import chunk_units, fit_to_tokens, scrub
from memory.privacy import ForgetRequest
from memory.tokens import count_tokens
from testkit.requests import prompt_text, section

HEADER = re.compile(r"Session (\S+) \((\d{4}-\d{2}-\d{2})\): (device logs|dialogue)[^\n]*\(part (\d+) of (\d+)\)")


def updater(fail: set[tuple[str, str, int]] = frozenset(), copy_user: bool = True, pad: int = 0):
    """Fake LLM: keeps the previous memory's bullets and adds one per chunk (plus the user's real sentences);
    garbage for (sample id, "logs"/"dialogue", part) in ``fail``; ``pad`` makes every answer that much longer."""

    def reply(req) -> str:
        prompt = prompt_text(req)
        sid, date, kind, part, parts = HEADER.search(prompt).groups()
        step = "logs" if kind == "device logs" else "dialogue"
        if (sid, step, int(part)) in fail:
            return "no"
        prev = section(prompt, "Previous memory")
        lines = [] if prev == "No previous memory." else prev.splitlines()
        lines.append(f"- {sid} {step} part {part}/{parts}.")
        chunk = section(prompt, "New section of the history")
        lines += [f"- {line[6:]}" for line in chunk.splitlines()
                  if copy_user and line.startswith("user: ") and "says something" not in line]
        return json.dumps({"memory": "\n".join(lines) + "x" * pad})

    return reply


def memory_item(builder, stage: int):
    return {i.id: i for i in builder.store.items_as_of(builder.build_id, stage)}.get(f"{builder.user.uid}_memory")


def test_one_chunk_per_stage_by_default(build_memory, tiny_user):
    builder, fake = build_memory("agentic", tiny_user, updater())
    builder.run()
    assert builder.config["chunk_tokens"] == 5000 and builder.config["memory_tokens"] == 2048
    assert len(fake.requests) == 8
    assert section(prompt_text(fake.requests[0]), "Previous memory") == "No previous memory."
    texts = [memory_item(builder, s).text for s in range(8)]
    assert len(set(texts)) == 8  # rewritten at every stage
    for stage in range(1, 8):
        assert section(prompt_text(fake.requests[stage]), "Previous memory") == texts[stage - 1]
    item = memory_item(builder, 7)
    assert item.layer == "memory" and item.text.count("\n") == 7
    assert item.meta["chunks"] == 8
    assert [s["chunk"] for s in item.meta["chunk_snapshots"]] == list(range(1, 9))
    assert [s["text"] for s in item.meta["chunk_snapshots"]] == texts
    last = tiny_user.sessions[-1].sample_id
    assert item.provenance[0] == f"log:{last}:0" and f"turn:{last}:8" in item.provenance
    assert item.provenance[-1] == f"item:{tiny_user.uid}_memory"
    assert not any(p.startswith(f"log:{tiny_user.sessions[0].sample_id}") for p in item.provenance)
    rows = builder.llm.store.calls("test")
    assert {(r["role"], r["prompt_name"], r["prompt_version"]) for r in rows} == {
        ("memory_builder", "memory/agentic_update", "2")}


def test_small_chunks_split_sessions_and_keep_snapshots(build_memory, tiny_user):
    builder, fake = build_memory("agentic", tiny_user, updater(), config={"chunk_tokens": 120})
    builder.run()
    prompts = [prompt_text(r) for r in fake.requests]
    first = [p for p in prompts if HEADER.search(p).group(1) == tiny_user.sessions[0].sample_id]
    log_parts = [p for p in first if "device logs" in p]
    assert len(log_parts) >= 3  # ten ~25-token log lines do not fit one 120-token chunk
    for p in prompts:
        header = HEADER.search(p).group(0)
        assert count_tokens(header + "\n" + section(p, "New section of the history").split("\n", 1)[1]) <= 120
    # every log line reached the model exactly once
    sent = "\n".join(section(p, "New section of the history").split("\n", 1)[1] for p in log_parts)
    assert sent.splitlines() == [f"- [{lg.timestamp:%Y-%m-%d %H:%M}] {lg.content}" for lg in tiny_user.sessions[0].logs]
    after_logs = memory_item(builder, 0)
    snaps = after_logs.meta["chunk_snapshots"]
    assert len(snaps) == len(log_parts) and after_logs.meta["chunks"] == len(log_parts)
    assert len({s["text"] for s in snaps}) == len(snaps) and snaps[-1]["text"] == after_logs.text
    final = memory_item(builder, 7)
    assert final.meta["chunks"] == len(fake.requests) > 20
    assert [s["chunk"] for s in final.meta["chunk_snapshots"]] == list(range(len(fake.requests) - 19,
                                                                              len(fake.requests) + 1))


def overflowing(extra: str, compressed: list[str] | None = None):
    """Fake LLM: every rewrite adds ``extra`` (over the cap); each compression request answers the next of
    ``compressed`` (the same over-long text again when they run out)."""
    base = updater()
    answers = iter(compressed or [])

    def reply(req) -> str:
        prompt = prompt_text(req)
        if "has grown too long" in prompt:
            memory = section(prompt, "Memory")
            return json.dumps({"memory": next(answers, memory)})
        return json.dumps({"memory": json.loads(base(req))["memory"] + "\n" + extra})

    return reply


LONG_EN = "\n".join(f"- The user mentioned detail number {i} about their week. It mattered to them." for i in range(40))


def test_a_rewrite_over_the_token_cap_is_compressed_by_the_model(build_memory, tiny_user):
    """Issue 18, item 4: the cap is in tokens; an overflowing rewrite is sent back to be compressed."""
    short = "- The user keeps a busy week. It matters to them."
    builder, fake = build_memory("agentic", tiny_user, overflowing(LONG_EN, [short]), config={"memory_tokens": 100})
    builder.run(until_session=0)
    assert count_tokens(LONG_EN) > 100
    first = memory_item(builder, 0)
    assert first.text == short and first.meta["chunk_snapshots"][0]["compressions"] == 1
    assert first.meta["chunk_snapshots"][0]["tokens"] == count_tokens(short) <= 100
    compress = [prompt_text(r) for r in fake.requests if "has grown too long" in prompt_text(r)]
    assert compress and "may be at most 100 tokens" in compress[0]
    assert int(re.search(r"it is (\d+) tokens", compress[0]).group(1)) > 100
    rows = builder.llm.store.calls("test")
    assert ("memory/agentic_compress", "1") in {(r["prompt_name"], r["prompt_version"]) for r in rows}


def test_still_over_after_the_retries_keeps_whole_sentences_only(build_memory, tiny_user):
    builder, fake = build_memory("agentic", tiny_user, overflowing(LONG_EN), config={"memory_tokens": 60})
    builder.run(until_session=0)
    item = memory_item(builder, 0)
    assert 0 < count_tokens(item.text) <= 60
    assert all(line.rstrip().endswith(".") for line in item.text.splitlines())  # never cut mid-sentence
    assert sum("has grown too long" in prompt_text(r) for r in fake.requests) == 2  # compress_retries
    assert any("still" in n and "over the 60-token cap" in n and "whole sentences" in n
               for n in builder.store.notes(builder.build_id)[0])


def test_the_cap_counts_chinese_in_tokens_not_characters():
    """8,000 characters of Chinese are ≈ 8,000 tokens (four times the paper's 2,048): the cap is in tokens."""
    text = "- 用户每周三晚上去游泳。她不喜欢早起。\n- 用户的女儿在上小学。"
    assert count_tokens("喜欢" * 50) == 100
    kept, dropped = fit_to_tokens(text, 12)
    assert kept == "- 用户每周三晚上去游泳。" and dropped == 2
    kept, dropped = fit_to_tokens("- Works 3.5 days a week. Likes tea.\n- Has a dog.", 9)
    assert kept == "- Works 3.5 days a week." and dropped == 2  # "3.5" is not a sentence end
    assert fit_to_tokens("- short.", 50) == ("- short.", 0)


def test_description_and_retrieval_agree():
    from memory.methods.agentic import AgenticMemory

    assert "current session's logs" in AgenticMemory.description and "only this memory" in AgenticMemory.description
    assert "plus the current session's logs" not in AgenticMemory.description


def test_invalid_output_keeps_the_memory_and_notes_it(build_memory, tiny_user):
    s1 = tiny_user.sessions[1].sample_id
    builder, fake = build_memory("agentic", tiny_user, updater(fail={(s1, "dialogue", 1)}))
    builder.run()
    assert memory_item(builder, 3).text == memory_item(builder, 2).text
    notes = builder.store.notes(builder.build_id)
    assert any(n.startswith(f"memory update (chunk 4, dialogue part 1) failed for {s1}") for n in notes[3])
    assert len(fake.requests) == 8 + 2  # two corrections asked for, then given up
    assert f"- {s1} dialogue part 1/1." not in memory_item(builder, 7).text
    assert f"- {tiny_user.sessions[2].sample_id} logs part 1/1." in memory_item(builder, 7).text


def test_forget_request_removes_the_fact(build_memory, tiny_user):
    s0, s2 = tiny_user.sessions[0], tiny_user.sessions[2]
    s0.turns[0].user.content = "I have a peanut allergy, so keep nuts away."
    s2.turns[1].user.content = "Please forget that I have a peanut allergy."
    builder, fake = build_memory("agentic", tiny_user, updater(), config={"chunk_tokens": 150})
    builder.run()
    assert "peanut allergy" in memory_item(builder, 4).text
    forget_prompts = [p for p in map(prompt_text, fake.requests) if "I have a peanut allergy" in section(p, "Forget requests")]
    assert forget_prompts and all(f"Session {s2.sample_id}" in p and "dialogue" in p for p in forget_prompts)
    after = memory_item(builder, 5)
    assert "peanut" not in after.text and f"- {s0.sample_id} logs part 1/" in after.text
    assert not any("peanut" in s["text"] for s in after.meta["chunk_snapshots"])
    assert "peanut" not in memory_item(builder, 7).text
    assert any(n.startswith("forget request: dropped") for n in builder.store.notes(builder.build_id)[5])


def test_retrieve_on_demo_user(build_memory, demo_user):
    builder, _ = build_memory("agentic", demo_user, updater(copy_user=False), dataset="demo")
    current = demo_user.sessions[7]
    trace = builder.retrieve("Any ideas for my week?", "requirement", current=current)
    assert [b.title for b in trace.blocks] == ["Memory"]  # query + memory only, as PersonaMem-v2 answers
    assert f"- {demo_user.sessions[6].sample_id} dialogue part 1/1." in trace.blocks[0].text
    assert f"- {current.sample_id} logs part 1/1." in trace.blocks[0].text
    assert [r.item.layer for r in trace.items] == ["memory"]
    assert 0 < trace.tokens < trace.full_history_tokens


def test_chunk_units_respects_the_budget():
    units = ["short line"] * 5 + [" ".join(["word"] * 50)] + ["tail"]
    chunks = chunk_units(units, 12)
    assert all(count_tokens(c) <= 12 for c in chunks)
    assert " ".join(" ".join(chunks).split()) == " ".join(" ".join(units).split())
    assert chunk_units([], 10) == []


def test_scrub_drops_only_the_sentences_that_mention_it():
    req = ForgetRequest("s", 1, "I have a peanut allergy")
    text = "- Likes hiking.\n- Has a peanut allergy. Works nights.\n- The peanut allergy is severe.\nPlain prose."
    cleaned, dropped = scrub(text, [req])
    assert cleaned == "- Likes hiking.\n- Works nights.\nPlain prose." and dropped == 2
    assert scrub(text, []) == (text, 0)
