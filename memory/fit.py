"""Fitting a retrieval trace's prompt blocks into a token budget, by each block's policy, recording every cut.

Policy (what is left out first):

1. blocks of the lowest ``rank`` first (the current session's logs have rank 9: they go last);
2. inside those, by the block's ``trim``: ``oldest_first`` leaves out the oldest parts (the full-history
   baseline's sessions), ``lowest_score`` the lowest-scored retrieved items (unscored ones — background,
   principles — after every scored one);
3. only when every trimmable part is gone, blocks without parts (a portrait, a summary) are shortened,
   keeping their beginning.

Each block that lost something gets one :class:`~backends.llm.context.Cut` naming what was left out
(``trimmed 4,210 tokens: sessions 1000_sample0–2``). Counting uses the caller's counter (the assistant
endpoint's own tokenizer when known); the trace's ``tokens`` stay in its own counter, recomputed.
"""

from __future__ import annotations

from collections.abc import Callable

from backends.llm.context import Budget, Cut
from memory.tokens import count_tokens
from memory.types import PromptBlock, RetrievalTrace, render_context

Count = Callable[[str], int]
SHORTENED = " … (shortened to fit the context window)"


def _order(blocks: list[PromptBlock]) -> list[tuple[int, int]]:
    """(block, part) pairs in the order they are left out."""
    keyed = []
    for bi, b in enumerate(blocks):
        if b.trim == "none":
            continue
        for pi, part in enumerate(b.parts):
            if b.trim == "oldest_first":
                key: tuple = (b.rank, 0, part.order, pi)
            else:
                key = (b.rank, part.score is None, part.score or 0.0, pi)
            keyed.append((key, bi, pi))
    return [(bi, pi) for _, bi, pi in sorted(keyed)]


def _without(blocks: list[PromptBlock], removed: dict[int, set[int]]) -> list[PromptBlock]:
    out = []
    for bi, b in enumerate(blocks):
        gone = removed.get(bi)
        if not gone:
            out.append(b)
            continue
        parts = [p for pi, p in enumerate(b.parts) if pi not in gone]
        out.append(b.model_copy(update={"parts": parts, "text": b.sep.join(p.text for p in parts)}))
    return out


def _shorten(blocks: list[PromptBlock], room: int, count: Count, counter: str) -> tuple[list[PromptBlock], list[Cut]]:
    """Last resort: shorten the longest remaining blocks (beginning kept) until the context fits."""
    cuts = []
    blocks = list(blocks)
    while (total := count(render_context(blocks))) > room:
        live = [i for i, b in enumerate(blocks) if b.text.strip()]
        if not live:
            break
        i = max(live, key=lambda j: len(blocks[j].text))
        text = blocks[i].text
        tokens = count(text)
        keep = max(0, int(len(text) * (tokens - (total - room)) / max(tokens, 1)) - len(SHORTENED))
        new = text[:keep] + SHORTENED if keep > 0 else ""
        blocks[i] = blocks[i].model_copy(update={"text": new, "parts": []})
        cuts.append(Cut(what=blocks[i].title, unit="characters", removed=[f"{keep}–{len(text)}"],
                        tokens=tokens - count(new), limit=room, counter=counter))
    return blocks, cuts


def _estimate(blocks: list[PromptBlock], count: Count) -> int:
    """The context's tokens as the sum of its pieces (each memoised by the counter, so later turns are free);
    one token per boundary keeps it at or above the count of the joined text."""
    total = 0
    for b in blocks:
        if not b.text.strip():
            continue
        body = sum(count(p.text) + 1 for p in b.parts) if b.parts else count(b.text)
        total += count(f"# {b.title}") + 2 + body
    return total


def fit_blocks(blocks: list[PromptBlock], room: int, count: Count,
               counter: str) -> tuple[list[PromptBlock], list[Cut], set[str]]:
    """(blocks whose context takes at most ``room`` tokens, the cuts, ids of the memory items left out)."""
    estimate = _estimate(blocks, count)
    if estimate <= room:
        return blocks, [], set()
    removed: dict[int, set[int]] = {}
    for bi, pi in _order(blocks):
        if estimate <= room:
            estimate = count(render_context(_without(blocks, removed)))  # check the real text once
            if estimate <= room:
                break
        removed.setdefault(bi, set()).add(pi)
        estimate -= count(blocks[bi].parts[pi].text) + 1
    fitted = _without(blocks, removed)
    cuts, refs = [], set()
    for bi, gone in sorted(removed.items()):
        b = blocks[bi]
        left_out = [b.parts[pi] for pi in sorted(gone, key=lambda pi: (b.parts[pi].order, pi))]
        refs |= {r for p in left_out for r in p.refs}
        cuts.append(Cut(what=b.title, unit=b.unit, removed=[p.label for p in left_out],
                        tokens=sum(count(p.text) for p in left_out), limit=room, counter=counter))
    fitted, shortened = _shorten(fitted, room, count, counter)
    return fitted, cuts + shortened, refs


def fit_trace(trace: RetrievalTrace, room: int, count: Count, counter: str) -> RetrievalTrace:
    """``trace`` with its blocks fitted into ``room`` tokens; the cuts recorded, items left out dropped."""
    blocks, cuts, gone = fit_blocks(trace.blocks, max(room, 0), count, counter)
    if not cuts:
        return trace
    return trace.model_copy(update={
        "blocks": blocks, "items": [r for r in trace.items if r.item.id not in gone], "cuts": [*trace.cuts, *cuts],
        "tokens": count_tokens(render_context(blocks))})


def fit_memory_prompt(budget: Budget, render: Callable[[str], str], trace: RetrievalTrace | None,
                      no_memory: str) -> tuple[str, RetrievalTrace | None]:
    """``render(memory)`` with the trace fitted into what the budget leaves beside the rest of the prompt."""
    if trace is None:
        return render(no_memory), None
    if budget.limit is not None:
        room = budget.limit - budget.count_messages([{"role": "user", "content": render("")}])
        trace = fit_trace(trace, room, budget.count, budget.counter_name)
    return render(trace.context or no_memory), trace

def without_shown(trace: RetrievalTrace, shown: str, count: Count = count_tokens) -> tuple[RetrievalTrace, list[str]]:
    """``trace`` without what ``shown`` (the notes of the dialogue's earlier turns) already holds, and the labels of
    the parts left out: a part whose text is in ``shown`` goes, as does a block without parts whose whole text is.

    Why: a retrieval method's assistant keeps each turn's note in its transcript (:mod:`sim.prompting`), so what it
    retrieved before is still in front of it; sending it again would make every turn's note new text for the
    server to read, where the dialogue so far is served from its prompt cache. The items stay in the trace (they
    are still in front of the assistant, in an earlier note): only the text to send shrinks."""
    if not shown:
        return trace, []
    blocks, repeated = [], []
    for b in trace.blocks:
        if not b.parts:
            again = bool(b.text.strip()) and b.text in shown
            blocks.append(b.model_copy(update={"text": ""}) if again else b)
            repeated += [b.title] if again else []
            continue
        keep = [p for p in b.parts if p.text not in shown]
        repeated += [p.label for p in b.parts if p.text in shown]
        blocks.append(b if len(keep) == len(b.parts) else
                      b.model_copy(update={"parts": keep, "text": b.sep.join(p.text for p in keep)}))
    if not repeated:
        return trace, []
    return trace.model_copy(update={"blocks": blocks, "tokens": count(render_context(blocks))}), repeated
