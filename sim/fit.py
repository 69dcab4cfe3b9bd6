"""Fitting a simulation prompt into its role's context window.

Policy, in order, until the prompt takes at most the role's budget (window − max_tokens):

1. the memory context (assistant only) is fitted by its blocks' policies (:mod:`memory.fit`: the full
   history's oldest sessions first, the lowest-scored retrieved items first, the current logs last);
2. the dialogue so far loses its oldest utterances, the last two always kept, with a line saying how many
   were left out.

Every cut is returned (and stored on the utterance and with the LLM call); the fixed part of the prompt
(instructions, persona, knowledge) is never cut — if it alone does not fit, the client refuses to send.

The dialogue roles send chat messages (:mod:`sim.prompting`): :func:`fit_messages` applies the same policy to a
message builder, dropping whole utterances from the start of the transcript.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from backends.llm.context import Budget, Cut
from memory.fit import fit_trace
from memory.privacy import redact_text
from memory.types import RetrievalTrace
from sim.types import Utterance

Render = Callable[[str, str], str]  # (memory text, dialogue text) → prompt
# (memory text, the utterances kept, how many older ones were left out) → messages
BuildMessages = Callable[[str, list[Utterance], int], list[dict[str, str]]]
KEEP_LAST = 2


def render_transcript(utterances: list[Utterance]) -> str:
    lines = [f"- {u.side}: {redact_text(u.content)}" for u in utterances]
    return "\n".join(lines) or "(nothing yet)"


@dataclass
class Fitted:
    text: str
    trace: RetrievalTrace | None = None
    cuts: list[Cut] = field(default_factory=list)  # the dialogue's; the trace keeps its own

    @property
    def all_cuts(self) -> list[Cut]:
        return [*(self.trace.cuts if self.trace else []), *self.cuts]


def _tokens(budget: Budget, text: str) -> int:
    return budget.count_messages([{"role": "user", "content": text}])


def fit_prompt(budget: Budget, render: Render, history: list[Utterance], trace: RetrievalTrace | None = None,
               memory_of: Callable[[RetrievalTrace | None], str] = lambda t: "") -> Fitted:
    """The prompt ``render(memory, dialogue)`` fitted into ``budget`` (see the module docstring)."""
    dialogue = render_transcript(history)
    limit = budget.limit
    if limit is None:
        return Fitted(render(memory_of(trace), dialogue), trace)
    if trace is not None:
        room = limit - _tokens(budget, render("", dialogue))
        trace = fit_trace(trace, room, budget.count, budget.counter_name)
    text = render(memory_of(trace), dialogue)
    if _tokens(budget, text) <= limit or len(history) <= KEEP_LAST:
        return Fitted(text, trace)
    before = _tokens(budget, text)
    kept, dropped = list(history), 0
    while _tokens(budget, text) > limit and len(kept) > KEEP_LAST:
        kept.pop(0)
        dropped += 1
        dialogue = (f"(… {dropped} earlier utterance(s) left out to fit the context window)\n"
                    + render_transcript(kept))
        text = render(memory_of(trace), dialogue)
    cut = Cut(what="dialogue so far", unit="utterances", removed=[str(i + 1) for i in range(dropped)],
              tokens=before - _tokens(budget, text), limit=limit, counter=budget.counter_name)
    return Fitted(text, trace, [cut])


@dataclass
class FittedMessages:
    messages: list[dict[str, str]]
    trace: RetrievalTrace | None = None
    cuts: list[Cut] = field(default_factory=list)  # the dialogue's; the trace keeps its own
    dropped: int = 0  # the oldest utterances left out of the messages to fit the window
    repeated: list[str] = field(default_factory=list)  # memory parts not sent again: an earlier note in the
    # transcript shows them (sim.assistant.Assistant.fitted)

    @property
    def all_cuts(self) -> list[Cut]:
        return [*(self.trace.cuts if self.trace else []), *self.cuts]


def fit_messages(budget: Budget, build: BuildMessages, history: list[Utterance], trace: RetrievalTrace | None = None,
                 memory_of: Callable[[RetrievalTrace | None], str] = lambda t: "") -> FittedMessages:
    """``build(memory, kept, dropped)`` fitted into ``budget``: the memory by its blocks' policies first, then the
    oldest utterances (the last two always kept)."""
    limit = budget.limit
    if limit is None:
        return FittedMessages(build(memory_of(trace), list(history), 0), trace)
    if trace is not None:
        room = limit - budget.count_messages(build("", list(history), 0))
        trace = fit_trace(trace, room, budget.count, budget.counter_name)
    memory = memory_of(trace)
    msgs = build(memory, list(history), 0)
    before = budget.count_messages(msgs)
    if before <= limit or len(history) <= KEEP_LAST:
        return FittedMessages(msgs, trace)
    dropped = 0
    while budget.count_messages(msgs) > limit and len(history) - dropped > KEEP_LAST:
        dropped += 1
        msgs = build(memory, list(history[dropped:]), dropped)
    cut = Cut(what="dialogue so far", unit="utterances", removed=[str(i + 1) for i in range(dropped)],
              tokens=before - budget.count_messages(msgs), limit=limit, counter=budget.counter_name)
    return FittedMessages(msgs, trace, [cut], dropped)


def first_turn_room(budget: Budget, language: str = "English") -> int | None:
    """Tokens the assistant's window leaves for the memory on a first turn (the Memory page's "fit" preview)."""
    from backends.prompts import load_prompt

    if budget.limit is None:
        return None
    prompt = load_prompt("sim/assistant")
    empty = [{"role": "system", "content": prompt.part("system", language=language, static_memory="")},
             {"role": "user", "content": prompt.part("turn", memory="", reply=prompt.part(
                 "reply", act="", definition="", language=language))}]
    return budget.limit - budget.count_messages(empty)
