"""Fitting a simulation prompt into its role's context window.

Policy, in order, until the prompt takes at most the role's budget (window − max_tokens):

1. the memory context (assistant only) is fitted by its blocks' policies (:mod:`memory.fit`: the full
   history's oldest sessions first, the lowest-scored retrieved items first, the current logs last);
2. the dialogue so far loses its oldest utterances, the last two always kept, with a line saying how many
   were left out.

Every cut is returned (and stored on the utterance and with the LLM call); the fixed part of the prompt
(instructions, persona, knowledge) is never cut — if it alone does not fit, the client refuses to send.
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


def first_turn_room(budget: Budget, language: str = "English") -> int | None:
    """Tokens the assistant's window leaves for the memory on a first turn (the Memory page's "fit" preview)."""
    from backends.prompts import load_prompt

    if budget.limit is None:
        return None
    empty = load_prompt("sim/assistant").render(memory_note="", memory="", dialogue="(nothing yet)", act="",
                                                definition="", language=language)
    return budget.limit - _tokens(budget, empty)
