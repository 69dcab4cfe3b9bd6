"""Dialogues (§2.12): per topic, a sampled framework and the act template; the LLM writes the words.

The acts and the framework reference of every turn are fixed by the template (so "action and
reference equal the template" holds by construction); the LLM fills in what each side says. One
call per topic keeps each answer small; the topics of a situation are concatenated in order.
History dialogues mix liked and disliked solutions and the assistant does not know the profile;
query dialogues use liked solutions only and an assistant that knows everything (§1.7).
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from backends.llm.dynamic import field, list_of
from palset.vocab import ASSISTANT_ACTS, USER_ACTS, Act, parse_act
from synth.config import SynthConfig
from synth.lang import act_label, dumps, language_name, profile_text
from synth.steps.base import Step, StepContext
from synth.steps.framework import situation_by_date


class Said(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str
    reference: str = ""  # Ti_Q, Ti_Nj, Ti_Sj: the framework part this utterance is about
    content: str = Field(min_length=1)


class DialogueTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: Said
    assistant: Said


class Dialogues(BaseModel):
    """End date → the dialogue's turns (topics in order)."""

    model_config = ConfigDict(extra="forbid")
    situations: dict[str, list[DialogueTurn]]
    frameworks: dict[str, dict[str, Any]] = Field(default_factory=dict)  # end date → sampled Ti_Q/Ti_Nj/Ti_Sj


Slot = tuple[Act, str, Act, str]  # user act, user reference, assistant act, assistant reference


def sample_framework(n_needs: int, pos: list[str], neg: list[str], split: str, rng: random.Random) -> tuple[int, list[tuple[str, str]]]:
    """(needs kept, [(solution, 'pos'|'neg')…]): 1 or both needs; history 1/2/3 of pos+neg, query 1–2 of pos."""
    needs = 1 if n_needs < 2 or rng.random() < 0.5 else 2
    if split == "query":
        k = rng.choice([1, 2])
        return needs, [(s, "pos") for s in rng.sample(pos, min(k, len(pos)))]
    k = rng.choices([1, 2, 3], weights=[0.2, 0.4, 0.4])[0]
    pool = [(s, "pos") for s in pos] + [(s, "neg") for s in neg]
    return needs, rng.sample(pool, min(k, len(pool)))


def template(topic: int, needs: int, solutions: int, rng: random.Random) -> list[Slot]:
    """The turn template of one topic (§2.12): 3–9 turns."""
    t = f"T{topic}"
    slots: list[Slot] = [(Act.TOPIC_INQUIRY, f"{t}_Q", Act.REQUIREMENT_PREDICTION, f"{t}_N1")]
    if needs == 2:
        slots.append((Act.REQUIREMENT_CONFIRMATION, f"{t}_N1", Act.REQUIREMENT_PREDICTION, f"{t}_N2"))
    slots.append((Act.REQUIREMENT_CONFIRMATION, f"{t}_N{needs}", Act.SOLUTION_PROPOSAL, f"{t}_S1"))
    for j in range(1, solutions + 1):
        if rng.random() < 0.5:
            slots.append((Act.SOLUTION_DISCUSSION, f"{t}_S{j}", Act.SOLUTION_DISCUSSION, f"{t}_S{j}"))
        last = j == solutions
        slots.append((Act.SOLUTION_FEEDBACK, f"{t}_S{j}", Act.FEEDBACK_RESPONSE if last else Act.SOLUTION_PROPOSAL,
                      f"{t}_S{j}" if last else f"{t}_S{j + 1}"))
    return slots


def turns_reply(n: int) -> type[Any]:
    item = create_model("TurnReply", user=(str, Field(min_length=2, max_length=200)),
                        assistant=(str, Field(min_length=2, max_length=250)))
    return create_model("TopicDialogueReply", turns=field(list_of(item), Field(min_length=n, max_length=n)))


def check_turn_texts(texts: list[tuple[str, str]]) -> str | None:
    for t, (user, assistant) in enumerate(texts, start=1):
        for role, text in (("user", user), ("assistant", assistant)):
            if text.strip() in ("", "...", "…"):
                return f"turns[{t - 1}].{role}: the utterance is empty; write what is said"
    return None


class DialoguesStep(Step):
    name = "dialogues"
    title = "Dialogues"
    spec = "§2.12"
    deps = ("profile", "situations", "dialogue_choice", "requirement_framework", "solution_preference")
    output_model = Dialogues
    prompt = "synth/dialogues"

    def run(self, ctx: StepContext) -> Dialogues:
        choice = ctx.inputs["dialogue_choice"]
        sits = situation_by_date(ctx.inputs)
        out: dict[str, list[DialogueTurn]] = {}
        frameworks: dict[str, dict[str, Any]] = {}
        jobs = []
        for end, topics in sorted(ctx.inputs["requirement_framework"].situations.items()):
            split = "query" if end in choice.query else "history"
            prefs = ctx.inputs["solution_preference"].situations[end]
            out[end], frameworks[end] = [], {}
            jobs += [(end, split, k, topic, pref) for k, (topic, pref) in enumerate(zip(topics, prefs), start=1)]
        # every topic's dialogue at once; each topic's sampled framework is merged in topic order, as one after another
        done = ctx.fan_out(lambda job: self._topic(ctx, *job, sits[job[0]].situation), jobs)
        for (end, *_), (turns, framework) in zip(jobs, done):
            out[end] += turns
            frameworks[end].update(framework)
        return Dialogues(situations=out, frameworks=frameworks)

    def _topic(self, ctx: StepContext, end: str, split: str, k: int, topic: Any, pref: Any,
               situation: str) -> tuple[list[DialogueTurn], dict[str, Any]]:
        """One topic's turns and the part of the framework sampled for it."""
        rng = ctx.rng(f"{end}/topic-{k}")
        reasons = {x.solution: x.feedback_reason for x in pref.pos_list + pref.neg_list}
        needs, chosen = sample_framework(len(topic.implicit_needs), [x.solution for x in pref.pos_list],
                                         [x.solution for x in pref.neg_list], split, rng)
        slots = template(k, needs, len(chosen), rng)
        t = f"T{k}"
        framework = {f"{t}_Q": topic.user_query,
                     **{f"{t}_N{j}": n.need for j, n in enumerate(topic.implicit_needs[:needs], start=1)},
                     **{f"{t}_S{j}": {"solution": s, "feedback": fb, "reason": reasons.get(s, "")}
                        for j, (s, fb) in enumerate(chosen, start=1)}}
        lang = ctx.config.lang
        plan = "\n".join(f"turn {i}: user [{ua.value}] about {ur}; assistant [{aa.value}] about {ar}"
                         for i, (ua, ur, aa, ar) in enumerate(slots, start=1))
        profile = ctx.inputs["profile"]
        knows = (profile_text(profile.model_dump(by_alias=True, exclude_none=True), with_personality=True)
                 if split == "query" else "(the assistant does not know the user's profile or preferences)")
        reply = ctx.ask(f"{end}/topic-{k}", self.prompt, {
            "language": language_name(lang), "situation": situation, "requirement": topic.requirement,
            "framework": dumps(framework), "plan": plan, "count": len(slots), "assistant_knows": knows},
            turns_reply(len(slots)), check=lambda r: check_turn_texts([(x.user, x.assistant) for x in r.turns]),
            max_tokens=100 + 180 * len(slots))
        return [DialogueTurn(user=Said(action=act_label(ua, lang), reference=ur, content=x.user.strip()),
                             assistant=Said(action=act_label(aa, lang), reference=ar, content=x.assistant.strip()))
                for (ua, ur, aa, ar), x in zip(slots, reply.turns)], framework

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        problems = []
        for end in inputs["requirement_framework"].situations:
            if not output.situations.get(end):
                problems.append(f"situations.{end}: no dialogue for this dialogue situation")
        for end, turns in output.situations.items():
            for t, turn in enumerate(turns):
                for role, allowed in (("user", USER_ACTS), ("assistant", ASSISTANT_ACTS)):
                    said = getattr(turn, role)
                    try:
                        act = parse_act(said.action)
                    except ValueError as e:
                        problems.append(f"situations.{end}[{t}].{role}.action: {e}")
                        continue
                    if act not in allowed:
                        problems.append(f"situations.{end}[{t}].{role}.action: '{said.action}' is not a {role} act")
            if p := check_turn_texts([(x.user.content, x.assistant.content) for x in turns]):
                problems.append(f"situations.{end}: {p}")
        return problems
