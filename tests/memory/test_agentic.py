"""Agentic memory: the flattened history cut into chunks across sessions, the memory rewritten after every chunk,
sizes that fit the window, per-chunk snapshots."""

from __future__ import annotations

import json
import re

from backends.config import ROLES
from backends.embeddings import HashEmbedder
from backends.llm.context import Budget
from backends.llm.counters import counter_for
from backends.llm.fake import ScriptedLLM
from backends.vectorstore import BruteForceStore
from memory.agentic_sizes import answer_tokens, negotiate
from memory.build import MemoryBuilder
from memory.methods.agentic import chunk_units, fit_to_tokens, scrub
from memory.privacy import ForgetRequest
from memory.tokens import count_tokens
from testkit.requests import prompt_text, section
from testkit.workspace import make_workspace

HEADER = re.compile(r"## Session (\S+) \((\d{4}-\d{2}-\d{2})\): (device logs|dialogue)")


def headers(chunk: str) -> list[tuple[str, str]]:
    return [(m.group(1), "logs" if m.group(3) == "device logs" else "dialogue") for m in HEADER.finditer(chunk)]


def chunk_of(req) -> str:
    prompt = prompt_text(req)
    return prompt.split("New section of the history:\n", 1)[1].split("\n\nForget requests:", 1)[0]


def updater(fail: set[tuple[str, str]] = frozenset(), copy_user: bool = True, pad: int = 0):
    """Fake LLM: keeps the previous memory's bullets and adds one per session part the chunk opens (plus the
    user's real sentences); garbage when the chunk's last header is in ``fail``; ``pad`` lengthens every answer."""

    def reply(req) -> str:
        prompt, chunk = prompt_text(req), chunk_of(req)
        seen = headers(chunk)
        if seen and seen[-1] in fail:
            return "no"
        prev = section(prompt, "Previous memory")
        lines = [] if prev == "No previous memory." else prev.splitlines()
        lines += [f"- saw {sid} {step}." for sid, step in seen]
        lines += [f"- {line[6:]}" for line in chunk.splitlines()
                  if copy_user and line.startswith("user: ") and "says something" not in line]
        return json.dumps({"memory": "\n".join(lines) + "x" * pad})

    return reply


def memory_item(builder, stage: int):
    return {i.id: i for i in builder.store.items_as_of(builder.build_id, stage)}.get(f"{builder.user.uid}_memory")


def flattened(user) -> list[str]:
    """Every header, log line and turn of the history, in order: the units the chunks must cover exactly once."""
    from memory.base import dialogue_turns, render_log

    out = []
    for s in user.sessions:
        out.append(f"## Session {s.sample_id} ({s.dialogue_timestamp:%Y-%m-%d}): device logs")
        out += [render_log(s, j) for j in range(len(s.logs))]
        out.append(f"## Session {s.sample_id} ({s.dialogue_timestamp:%Y-%m-%d}): dialogue between the user and the "
                   "assistant")
        out += [text for _, text in dialogue_turns(s)]
    return out


def test_a_history_under_one_chunk_is_read_whole_at_every_stage(build_memory, tiny_user):
    """5,000-token chunks: the tiny history never fills one, so each stage rewrites the empty memory with the whole
    history so far (the paper's loop on a history that ends there) and nothing is committed."""
    builder, fake = build_memory("agentic", tiny_user, updater())
    builder.run()
    assert builder.config["chunk_tokens"] == 5000 and builder.config["memory_tokens"] == 2048
    assert len(fake.requests) == 8
    for stage, req in enumerate(fake.requests):
        assert section(prompt_text(req), "Previous memory") == "No previous memory."
        assert len(headers(chunk_of(req))) == stage + 1  # the flattened history so far, across sessions
        assert req.max_tokens == answer_tokens(2048)  # a whole memory fits the answer, not the role's 512
    item = memory_item(builder, 7)
    assert item.meta["chunks"] == 0 and item.meta["committed"] == "No previous memory."
    assert item.meta["pending"] == flattened(tiny_user)
    assert item.text.count("- saw ") == 8 and item.meta["chunk_snapshots"][-1]["provisional"]
    last = tiny_user.sessions[-1].sample_id
    assert item.provenance[0] == f"log:{last}:0" and f"turn:{last}:8" in item.provenance
    assert item.provenance[-1] == f"item:{tiny_user.uid}_memory"
    rows = builder.llm.store.calls("test")
    assert {(r["role"], r["prompt_name"], r["prompt_version"]) for r in rows} == {
        ("memory_builder", "memory/agentic_update", "3")}


def test_chunks_cut_the_flattened_history_regardless_of_sessions(build_memory, tiny_user):
    """Chunk boundaries are those of the whole flattened history (never where a session ends); each full chunk
    is read once and committed; the memory shown after a stage has also read what is pending."""
    builder, fake = build_memory("agentic", tiny_user, updater(), config={"chunk_tokens": 150})
    builder.run()
    whole = chunk_units(flattened(tiny_user), 150)
    final = memory_item(builder, 7)
    assert final.meta["chunks"] == len(whole) - 1 > 10
    assert "\n".join(final.meta["pending"]) == whole[-1]
    sent = [chunk_of(r) for r in fake.requests]
    assert all(count_tokens(c) <= 150 for c in sent)
    for chunk in whole[:-1]:  # every full chunk was sent, and with the memory committed before it
        assert sent.count(chunk) == 1
    assert any(headers(c) and not c.startswith("## ") for c in whole)  # a chunk runs on past a stage's end
    committed = [s for s in final.meta["chunk_snapshots"] if not s["provisional"]]
    assert committed and final.meta["committed"] == committed[-1]["text"]
    assert final.meta["chunk_snapshots"][-1]["provisional"]  # the shown memory has read the pending part too
    stage3 = memory_item(builder, 3)  # the next stage started from the committed memory, not the shown one
    nxt = [r for r in fake.requests if section(prompt_text(r), "Previous memory") == stage3.text]
    assert not nxt or stage3.text == stage3.meta["committed"]


def test_sizes_are_negotiated_with_a_small_window(tmp_path, tiny_user):
    ws = make_workspace(tmp_path / "home", env={"PAL_MEMORY_BUILDER_CONTEXT_WINDOW": "4096"})
    fake = ScriptedLLM(updater())
    client = ws.llm(session_id="test", providers=dict.fromkeys(ROLES, fake))
    embedder = HashEmbedder()
    builder = MemoryBuilder("ds", tiny_user, "agentic", ws.memory, BruteForceStore(embedder), embedder, llm=client,
                            files_root=ws.paths.method_files)
    builder.run(until_session=0)
    sizes = memory_item(builder, 0).meta["sizes"]
    assert sizes["window"] == 4096 and sizes["chunk_tokens"] < 5000 and sizes["memory_tokens"] < 2048
    assert sizes["max_tokens"] == answer_tokens(sizes["memory_tokens"])
    assert all(r.max_tokens == sizes["max_tokens"] for r in fake.requests)
    notes = builder.store.notes(builder.build_id)[0]
    assert any("window of 4,096 tokens" in n and "no rewrite is cut" in n for n in notes)


def test_negotiate_keeps_the_papers_sizes_when_they_fit_and_shrinks_chunk_then_cap():
    counter = counter_for("estimate", "m", None)
    big = Budget("memory_builder", 32768, "configured", 1, counter)
    assert negotiate(5000, 2048, big, "prompt " * 50, "some history text") == negotiate(5000, 2048, big, "prompt " * 50,
                                                                                           "some history text")
    sizes = negotiate(5000, 2048, big, "prompt " * 50, "some history text")
    assert (sizes.chunk_tokens, sizes.memory_tokens, sizes.note) == (5000, 2048, "")
    mid = negotiate(5000, 2048, Budget("memory_builder", 9000, "configured", 1, counter), "p " * 50, "text")
    assert mid.memory_tokens == 2048 and mid.chunk_tokens < 5000 and "holds chunks" in mid.note
    small = negotiate(5000, 2048, Budget("memory_builder", 4096, "configured", 1, counter), "p " * 50, "text")
    assert small.memory_tokens < 2048 and small.chunk_tokens >= 1024 // 2
    assert negotiate(5000, 2048, None, "", "x").max_tokens == answer_tokens(2048)


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
    """The cap is in tokens; an overflowing rewrite is sent back to be compressed."""
    short = "- The user keeps a busy week. It matters to them."
    builder, fake = build_memory("agentic", tiny_user, overflowing(LONG_EN, [short]), config={"memory_tokens": 100})
    builder.run(until_session=0)
    assert count_tokens(LONG_EN) > 100
    first = memory_item(builder, 0)
    assert first.text == short and first.meta["chunk_snapshots"][0]["compressions"] == 1
    assert first.meta["chunk_snapshots"][0]["tokens"] == count_tokens(short) <= 100
    compress = [r for r in fake.requests if "has grown too long" in prompt_text(r)]
    assert compress and "may be at most 100 tokens" in prompt_text(compress[0])
    assert compress[0].max_tokens == answer_tokens(100)
    assert int(re.search(r"it is (\d+) tokens", prompt_text(compress[0])).group(1)) > 100
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
    assert "flattened history" in AgenticMemory.description


def test_invalid_output_keeps_the_memory_and_notes_it(build_memory, tiny_user):
    s1 = tiny_user.sessions[1].sample_id
    builder, fake = build_memory("agentic", tiny_user, updater(fail={(s1, "dialogue")}))
    builder.run()
    assert memory_item(builder, 3).text == memory_item(builder, 2).text
    notes = builder.store.notes(builder.build_id)
    assert any(n.startswith("memory update (chunk 1, so far) failed for " + s1) for n in notes[3])
    assert len(fake.requests) == 8 + 2  # two corrections asked for, then given up
    assert f"- saw {tiny_user.sessions[2].sample_id} logs." in memory_item(builder, 7).text


def test_forget_request_removes_the_fact(build_memory, tiny_user):
    s0, s2 = tiny_user.sessions[0], tiny_user.sessions[2]
    s0.turns[0].user.content = "I have a peanut allergy, so keep nuts away."
    s2.turns[1].user.content = "Please forget that I have a peanut allergy."
    builder, fake = build_memory("agentic", tiny_user, updater(), config={"chunk_tokens": 150})
    builder.run()
    assert "peanut allergy" in memory_item(builder, 4).text
    forget_prompts = [p for p in map(prompt_text, fake.requests) if "I have a peanut allergy" in section(p, "Forget requests")]
    first_s2 = next(i for i, r in enumerate(fake.requests) if (s2.sample_id, "dialogue") in headers(chunk_of(r)))
    asked = [i for i, r in enumerate(fake.requests) if "I have a peanut allergy" in section(prompt_text(r), "Forget requests")]
    assert forget_prompts and min(asked) >= first_s2  # only the stage that holds the request passes it on
    after = memory_item(builder, 5)
    assert "peanut" not in after.text and "peanut" not in after.meta["committed"]
    assert not any("peanut" in u for u in after.meta["pending"])
    assert not any("peanut" in s["text"] for s in after.meta["chunk_snapshots"])
    assert "peanut" not in memory_item(builder, 7).text
    assert not any("peanut" in chunk_of(r) for r in fake.requests[len(forget_prompts) + 30:]
                   if f"Session {s2.sample_id}" not in chunk_of(r))


def test_retrieve_on_demo_user(build_memory, demo_user):
    builder, _ = build_memory("agentic", demo_user, updater(copy_user=False), dataset="demo")
    current = demo_user.sessions[7]
    trace = builder.retrieve("Any ideas for my week?", "requirement", current=current)
    assert [b.title for b in trace.blocks] == ["Memory"]  # query + memory only, as PersonaMem-v2 answers
    assert f"- saw {demo_user.sessions[6].sample_id} dialogue." in trace.blocks[0].text
    assert f"- saw {current.sample_id} logs." in trace.blocks[0].text
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
