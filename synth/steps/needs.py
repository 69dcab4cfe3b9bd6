"""Requirement types per aspect (§2.3) and the pos/neg solution preferences of each (§2.4)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from backends.llm.dynamic import field, list_of
from palset.models import Aspect
from palset.vocab import ASPECTS
from synth.config import SynthConfig
from synth.lang import dumps, language_name, profile_text
from synth.steps.base import Step, StepContext, Tolerable

Phrase = Annotated[str, Field(min_length=2, max_length=60)]


class RequirementTypesReply(BaseModel):
    """4–5 abstract, long-term requirement types per aspect, as short phrases."""

    work: list[Phrase] = Field(min_length=4, max_length=5)
    health: list[Phrase] = Field(min_length=4, max_length=5)
    family: list[Phrase] = Field(min_length=4, max_length=5)
    leisure: list[Phrase] = Field(min_length=4, max_length=5)


class RequirementTypes(BaseModel):
    """Aspect → ``{"aspect-n": phrase}`` (``requirement.json``)."""

    model_config = ConfigDict(extra="forbid")
    types: dict[Aspect, dict[str, Annotated[str, Field(min_length=1)]]]


def check_requirement_types(types: dict[str, dict[str, str]]) -> str | None:
    """Four aspects present, 4–5 ids each named exactly ``aspect-1…`` (§2.3)."""
    for aspect in ASPECTS:
        ids = list(types.get(aspect, {}))
        if aspect not in types:
            return f"aspect '{aspect}' is missing"
        if not 4 <= len(ids) <= 5:
            return f"aspect '{aspect}' needs 4–5 requirement types, found {len(ids)}"
        expected = [f"{aspect}-{n}" for n in range(1, len(ids) + 1)]
        if ids != expected:
            return f"ids of '{aspect}' must be {', '.join(expected)}, got {', '.join(ids)}"
    return None


class RequirementTypesStep(Step):
    name = "requirement_types"
    title = "Requirement types"
    spec = "§2.3"
    deps = ("profile", "timeline")
    output_model = RequirementTypes
    prompt = "synth/requirement_types"

    def run(self, ctx: StepContext) -> RequirementTypes:
        profile = ctx.inputs["profile"].model_dump(by_alias=True, exclude_none=True)

        reply = ctx.ask("", self.prompt, {"language": language_name(ctx.config.lang), "profile": profile_text(profile),
                                          "timeline": dumps(ctx.inputs["timeline"].months)},
                        RequirementTypesReply, max_tokens=700)
        return RequirementTypes(types={a: {f"{a}-{n}": p.strip() for n, p in enumerate(getattr(reply, a), start=1)}
                                       for a in ASPECTS})

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        problem = check_requirement_types(output.types)
        return [problem] if problem else []


# ---------------------------------------------------------------- preferences


class PreferenceEntry(BaseModel):
    """One requirement type's preference; ``analysis`` is kept here and dropped from the release."""

    model_config = ConfigDict(extra="forbid")
    requirement: str = Field(min_length=1)
    analysis: str = ""
    pos: str = Field(min_length=1)
    neg: str = Field(min_length=1)


class Preferences(BaseModel):
    model_config = ConfigDict(extra="forbid")
    preferences: dict[Aspect, dict[str, PreferenceEntry]]


def preference_reply(n: int) -> type[BaseModel]:
    item = create_model("PreferenceReply", analysis=(str, Field(min_length=20, max_length=150)),
                        pos=(str, Field(min_length=20, max_length=250)), neg=(str, Field(min_length=20, max_length=250)))
    return create_model("AspectPreferencesReply", items=field(list_of(item), Field(min_length=n, max_length=n)))


def check_preference_texts(pos: str, neg: str, where: str) -> str | None:
    if pos.strip().lower() == neg.strip().lower():
        return Tolerable(f"{where}: 'pos' and 'neg' are the same text; 'neg' must describe solutions the user rejects",
                         "pos and neg preference alike")
    return None


class PreferencesStep(Step):
    name = "preferences"
    title = "Preferences"
    spec = "§2.4"
    deps = ("profile", "timeline", "requirement_types")
    output_model = Preferences
    prompt = "synth/preferences"

    def run(self, ctx: StepContext) -> Preferences:
        profile = ctx.inputs["profile"]
        types = ctx.inputs["requirement_types"].types

        def aspect_preferences(aspect: str) -> dict[str, PreferenceEntry]:
            phrases = types[aspect]
            reply_model = preference_reply(len(phrases))

            def check(r: Any, ids: tuple[str, ...] = tuple(phrases)) -> str | None:
                for rid, item in zip(ids, r.items):
                    if problem := check_preference_texts(item.pos, item.neg, rid):
                        return problem
                return None

            reply = ctx.ask(aspect, self.prompt, {
                "language": language_name(ctx.config.lang), "aspect": aspect,
                "profile": profile_text(profile.model_dump(by_alias=True, exclude_none=True)),
                "personality": dumps(profile.personality.as_dict()),
                "timeline": dumps(ctx.inputs["timeline"].months),
                "requirement_types": "\n".join(f"{n}. {p}" for n, p in enumerate(phrases.values(), start=1)),
                "count": len(phrases)}, reply_model, check=check, max_tokens=100 + 300 * len(phrases))
            return {rid: PreferenceEntry(requirement=phrase, analysis=item.analysis.strip(), pos=item.pos.strip(),
                                         neg=item.neg.strip())
                    for (rid, phrase), item in zip(phrases.items(), reply.items)}  # type: ignore[attr-defined]  # reply is the run-time model built by preference_reply

        return Preferences(preferences=dict(zip(ASPECTS, ctx.fan_out(aspect_preferences, ASPECTS))))

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        problems = []
        types = inputs["requirement_types"].types
        for aspect in ASPECTS:
            got, want = list(output.preferences.get(aspect, {})), list(types.get(aspect, {}))
            if got != want:
                problems.append(f"preferences.{aspect}: ids must be {', '.join(want)}, got {', '.join(got) or 'none'}")
                continue
            for rid, entry in output.preferences[aspect].items():
                if entry.requirement != types[aspect][rid]:
                    problems.append(f"preferences.{aspect}.{rid}.requirement: must copy the requirement type "
                                    f"\"{types[aspect][rid]}\" verbatim")
                if problem := check_preference_texts(entry.pos, entry.neg, f"preferences.{aspect}.{rid}"):
                    problems.append(problem)
        return problems
