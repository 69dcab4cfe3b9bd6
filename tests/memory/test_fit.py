"""Fitting retrieval traces into a window: full history loses its oldest sessions, RAG its lowest-scored items."""

from backends.llm.counters import estimate_tokens
from memory.fit import fit_blocks, fit_trace, without_shown
from memory.types import BlockPart, PromptBlock, RetrievalTrace, render_context


def count(text):
    return estimate_tokens(text)


def built(build_memory, method, user):
    builder, _ = build_memory(method, user, lambda req: "{}")
    builder.run()
    return builder


def test_full_history_drops_the_oldest_sessions_first(build_memory, demo_user):
    builder = built(build_memory, "full-history", demo_user)
    current = demo_user.query[0]
    trace = builder.retrieve("sleep", "requirement", current)
    room = trace.tokens // 3
    fitted = fit_trace(trace, room, count, "estimate")
    assert count(fitted.context) <= room
    history = [s.sample_id for s in demo_user.sessions if s.index < current.index]
    cut = fitted.cuts[0]
    assert cut.what == "Interaction history" and cut.unit == "sessions"
    assert cut.removed == history[: len(cut.removed)]  # a prefix: oldest first
    assert history[-1] in fitted.context and history[0] not in fitted.context.split("# Logs")[0]
    assert cut.describe().startswith(f"trimmed {cut.tokens:,} tokens: sessions {history[0]}")
    assert all(r.item.session_id not in cut.removed for r in fitted.items)  # items left out are not listed
    assert "Logs of the current session" in fitted.context  # the current logs go last
    assert trace.cuts == [] and fitted.summary()["cuts"][0]["removed"] == cut.removed


def test_rag_drops_the_lowest_scored_items_first(build_memory, demo_user):
    builder = built(build_memory, "rag-turn", demo_user)
    trace = builder.retrieve("trouble sleeping after night shifts", "requirement", demo_user.query[0])
    scored = sorted((r for r in trace.items), key=lambda r: r.score)
    history_text = render_context(trace.blocks[:2])
    room = count(render_context(trace.blocks)) - count(history_text) // 2
    fitted = fit_trace(trace, room, count, "estimate")
    removed = [label for c in fitted.cuts for label in c.removed]
    assert removed and count(fitted.context) <= room
    kept_scores = [r.score for r in fitted.items]
    assert max(r.score for r in scored if r.item.id in removed) <= min(kept_scores)


def test_unsplittable_blocks_are_shortened_last_keeping_their_start():
    blocks = [PromptBlock(title="Portrait", text="alpha " * 200),
              PromptBlock.of_parts("Events", [BlockPart(text=f"event {i} " * 5, label=f"e{i}", score=i) for i in range(5)],
                                   "lowest_score", "items")]
    fitted, cuts, _ = fit_blocks(blocks, 60, count, "estimate")
    assert count(render_context(fitted)) <= 60
    assert cuts[0].removed == ["e0", "e1", "e2", "e3", "e4"] and cuts[1].unit == "characters"
    assert fitted[0].text.startswith("alpha alpha") and "shortened" in fitted[0].text


def test_a_context_that_fits_is_left_alone(build_memory, tiny_user):
    builder = built(build_memory, "full-history", tiny_user)
    trace = builder.retrieve("x", "requirement", tiny_user.query[0])
    assert fit_trace(trace, trace.tokens + 100, count, "estimate") is trace


def test_parts_an_earlier_note_shows_are_not_sent_again_but_stay_retrieved(build_memory, demo_user):
    """A retrieval assistant keeps its notes in the transcript: a later turn's note leaves out
    the parts already there — its items stay in the trace, since they are still in front of the assistant."""
    builder = built(build_memory, "rag-turn", demo_user)
    trace = builder.retrieve("sleep", "requirement", demo_user.query[0])
    logs = next(b for b in trace.blocks if b.title == "Logs of the current session")
    shown = "earlier note:\n" + "\n".join(p.text for p in logs.parts[:2])
    new, repeated = without_shown(trace, shown)
    assert repeated == [p.label for p in logs.parts[:2]]
    assert all(p.text not in new.context for p in logs.parts[:2]) and logs.parts[2].text in new.context
    assert new.items == trace.items and new.tokens < trace.tokens
    assert without_shown(trace, "") == (trace, []) and without_shown(trace, "nothing of it") == (trace, [])
    everything, repeated = without_shown(trace, trace.context)
    assert everything.context == "" and everything.tokens == 0 and len(repeated) == sum(len(b.parts) for b in trace.blocks)


def test_a_block_without_parts_goes_only_when_its_whole_text_was_shown():
    trace_blocks = [PromptBlock(title="Background", text="Works nights. Sleeps badly."),
                    PromptBlock.of_parts("Logs", [BlockPart(text="- a log", label="L1")], "lowest_score", "items")]
    trace = RetrievalTrace(method="h2memory", query="q", purpose="requirement", as_of_session=None, blocks=trace_blocks)
    new, repeated = without_shown(trace, "note: Works nights.")
    assert repeated == [] and new is trace
    new, repeated = without_shown(trace, "note: Works nights. Sleeps badly.\n- a log")
    assert repeated == ["Background", "L1"] and new.context == ""
