"""FairEval's judge prompts: the named prompt sets, and the inputs each fills its prompt with.

``mempal`` (the default) is the Mem-PAL authors' judge prompt — the Chinese original they released
(``perassist_framework/code/dialogue_evaluation/eval_llm_prompt``) for Chinese users, the English version of their
Appendix for English users — filled as their ``perform_evaluation.py`` fills it: the profile without personality,
the personality and the situation as JSON, the aspect's ground truth as indented JSON whose list items are one-line
JSON, and each dialogue as ``- "user": "…"`` lines in its own slot. ``compact`` is PAL Studio's shorter English
wording (about half the tokens), kept as a named alternative; judgments made with it keep their keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from backends.prompts import Prompt, load_prompt
from memory.privacy import redact_text
from sim.simulator import TopicContext
from sim.types import RunRecord

Aspect = Literal["requirement", "preference"]
ASPECTS: tuple[Aspect, ...] = ("requirement", "preference")
ORDER_WARNING = ("The two conversations are shown in random order. The order in which they appear must not "
                 "influence your judgement.")


class FairEvalSettingsError(ValueError):
    """Settings that cannot give a FairEval judgment (k > 1 at temperature 0, an unknown prompt set)."""


def render_dialogue(record: RunRecord, quoted: bool = False) -> str:
    """A run's transcript as the paper shows it to the judge: '- "user": …' lines, no action labels; ``quoted``:
    each utterance in double quotes, as the authors' ``perform_evaluation.py`` writes it."""
    if quoted:
        return "\n".join(f'- "{u.side}": "{redact_text(u.content)}"' for u in record.utterances) or "(empty)"
    return "\n".join(f'- "{u.side}": {redact_text(u.content)}' for u in record.utterances) or "(empty)"


def ground_truth(ctx: TopicContext, aspect: Aspect) -> str:
    """What the judge knows about the topic: the needs (requirement) or the preferences (preference)."""
    t = ctx.topic.topic
    if aspect == "requirement":
        lines = [f"User query: {t.user_query}", "Implicit needs:"]
        for i, (need, ev) in enumerate(ctx.needs_with_evidence()):
            lines.append(f"{i + 1}. {need}" + (f" (evidence: {'; '.join(ev)})" if ev else ""))
        lines.append(f"Requirement: {t.requirement}")
        return redact_text("\n".join(lines))
    lines = [f"Requirement: {t.requirement}"]
    if pref := ctx.preference():
        lines += [f"General preference (accepts): {pref.preference.pos}",
                  f"General preference (rejects): {pref.preference.neg}"]
    liked, disliked = ctx.topic.liked_and_disliked()
    lines += ["Candidate solutions the user likes:", *(f"- {s}" + (f" (reason: {r})" if r else "") for s, r in liked),
              "Candidate solutions the user dislikes:", *(f"- {s}" + (f" (reason: {r})" if r else "") for s, r in disliked)]
    return redact_text("\n".join(lines))


def render_pair(first: str, second: str) -> str:
    """Both dialogues under the names assistant-1 / assistant-2, with the order warning."""
    return f"{ORDER_WARNING}\n\n## assistant-1\n{first}\n\n## assistant-2\n{second}"


def judge_messages(prompt: Prompt, ctx: TopicContext, aspect: Aspect, first: str, second: str) -> list[dict[str, str]]:
    """The ``compact`` judge input per §4.4: profile (no personality), personality, situation, ground truth,
    dialogues — the profile in the system message, shared by every call of the topic (aspects, orders, samples)."""
    return prompt.messages(persona=ctx.persona(), personality=ctx.personality(), situation=ctx.situation(),
                           truth=ground_truth(ctx, aspect), dialogues=render_pair(first, second))


def _json(value: Any, indent: int | None = None) -> str:
    return redact_text(json.dumps(value, ensure_ascii=False, indent=indent))


def _embedded(outer: dict[str, Any], lists: dict[str, list[dict[str, Any]]]) -> str:
    """``outer`` as indented JSON with each item of ``lists`` (placeholders ``<name_i>``) replaced by its one-line
    JSON inside the placeholder's quotes — verbatim what the authors' ``get_prompt`` writes for ``implicit_needs`` and
    the candidate solutions (their prompt_example.md shows ``"{"need": …}"``)."""
    text = json.dumps(outer, indent=4, ensure_ascii=False)
    for path, items in lists.items():
        for i, item in enumerate(items):
            text = text.replace(f"<{path}_{i}>", json.dumps(item, ensure_ascii=False))
    return redact_text(text)


def mempal_truth(ctx: TopicContext, aspect: Aspect) -> str:
    """The ground truth as the authors' ``get_prompt`` fills ``<requirement>`` / ``<preference>``."""
    t = ctx.topic.topic
    if aspect == "requirement":
        needs = [{"need": need, "evidences": ev} for need, ev in ctx.needs_with_evidence()]
        outer: dict[str, Any] = {"user_query": t.user_query, "implicit_needs": [f"<needs_{i}>" for i in range(len(needs))],
                 "requirement": t.requirement}
        return _embedded(outer, {"needs": needs})
    pref = ctx.preference()
    liked, disliked = ctx.topic.liked_and_disliked()
    pos = [{"solution": s, "feedback_reason": r} for s, r in liked]
    neg = [{"solution": s, "feedback_reason": r} for s, r in disliked]
    prefs: dict[str, Any] = {"requirement": t.requirement,
             "general_preference": {"pos": pref.preference.pos, "neg": pref.preference.neg} if pref else {},
             "candidate_solutions": {"pos_list": [f"<pos_{i}>" for i in range(len(pos))],
                                     "neg_list": [f"<neg_{i}>" for i in range(len(neg))]}}
    return _embedded(prefs, {"pos": pos, "neg": neg})


def mempal_messages(prompt: Prompt, ctx: TopicContext, aspect: Aspect, first: str,
                    second: str) -> list[dict[str, str]]:
    """The authors' judge input: the profile without personality, the personality and the situation as JSON, the
    aspect's ground truth (:func:`mempal_truth`) and the two dialogues in their own slots."""
    p = ctx.user.profile
    background = p.model_dump(by_alias=True, exclude={"id", "personality"}) if p else {}
    personality = p.personality.as_dict() if p else {}
    sit = ctx.user.situations.get(ctx.session.situation_id or "")
    return prompt.messages(background=_json(background), personality=_json(personality),
                           situation=_json(sit.situation if sit else ""), truth=mempal_truth(ctx, aspect),
                           dialogue_1=first, dialogue_2=second)


@dataclass(frozen=True)
class PromptSet:
    """A judge wording: its prompt files (``{aspect}`` filled), how it fills them, how it writes a dialogue."""

    name: str
    label: str
    template: str
    messages: Callable[[Prompt, TopicContext, Aspect, str, str], list[dict[str, str]]]
    quoted: bool  # utterances in double quotes, as the authors' code writes them

    def prompt(self, aspect: str, language: str | None) -> Prompt:
        return load_prompt(self.template.format(aspect=aspect), language=language)


PROMPT_SETS: dict[str, PromptSet] = {
    "mempal": PromptSet("mempal", "Mem-PAL authors' judge prompt (released Chinese; their Appendix's English)",
                        "eval/faireval_mempal_{aspect}", mempal_messages, quoted=True),
    "compact": PromptSet("compact", "PAL Studio's compact English wording", "eval/faireval_{aspect}",
                         judge_messages, quoted=False),
}
DEFAULT_PROMPT_SET = "mempal"
LEGACY_PROMPTS = frozenset({"eval/faireval_requirement", "eval/faireval_preference"})


def prompt_set(name: str | None) -> PromptSet:
    """The named prompt set (None: the default); an unknown name is a :class:`FairEvalSettingsError`."""
    key = name or DEFAULT_PROMPT_SET
    if key not in PROMPT_SETS:
        raise FairEvalSettingsError(f"unknown judge prompt set {key!r} (known: {', '.join(PROMPT_SETS)})")
    return PROMPT_SETS[key]
