"""Profile (§2.1) and monthly timeline (§2.2): who the user is and what happened each month."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from backends.llm.dynamic import field, list_of, one_of
from palset.models import Profile
from synth.config import SynthConfig
from synth.lang import dumps, language_name, profile_text
from synth.steps.base import Step, StepContext, Tolerable

Level = Literal["low", "medium", "high"]


class _Reply(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class PersonalityReply(_Reply):
    Openness: Level
    Conscientiousness: Level
    Extraversion: Level
    Agreeableness: Level
    Neuroticism: Level


class ProfileReply(_Reply):
    """What the LLM writes for a profile (bounded; ages exclude students and retirees)."""

    name: str = Field(min_length=2, max_length=40)
    gender: str = Field(min_length=1, max_length=10)
    age: int = Field(ge=22, le=65)
    occupation: str = Field(min_length=20, max_length=300)
    health_status: str = Field(alias="health status", min_length=20, max_length=300)
    family_members: str = Field(alias="family members", min_length=20, max_length=300)
    hobbies: str = Field(min_length=20, max_length=300)
    personality: PersonalityReply


def check_profile(reply: ProfileReply | Profile, seed: dict | None) -> str | None:
    """The spec's rule beyond the schema: a new user, not a copy of the format example."""
    if seed and reply.name.strip() == str(seed.get("name", "")).strip():
        return Tolerable(f'"name" repeats the example user "{reply.name.strip()}"; invent a different person',
                         "name copied from the example")
    if seed and reply.occupation.strip() == str(seed.get("occupation", "")).strip():
        return Tolerable('"occupation" copies the example user; write this user\'s own occupation',
                         "occupation copied from the example")
    return None


class ProfileStep(Step):
    name = "profile"
    title = "Profile"
    spec = "§2.1"
    output_model = Profile
    prompt = "synth/profile"

    def run(self, ctx: StepContext) -> Profile:
        seed = ctx.config.seed_profile
        example = profile_text(seed, with_personality=True) if seed else "(none)"
        wanted = ctx.config.description or "(free choice: vary occupation, family situation, health and personality)"
        reply = ctx.ask("", self.prompt, {"language": language_name(ctx.config.lang), "example": example,
                                          "description": wanted},
                        ProfileReply, check=lambda r: check_profile(r, seed), max_tokens=800)
        return Profile.model_validate(reply.model_dump(by_alias=True))

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        problem = check_profile(output, config.seed_profile)
        return [problem] if problem else []


# ---------------------------------------------------------------- timeline


class Timeline(BaseModel):
    """Month key (``2024-09`` or ``2024年9月``) → one paragraph of that month's events."""

    model_config = ConfigDict(extra="forbid")
    months: dict[str, Annotated[str, Field(min_length=1)]]


def timeline_reply(keys: list[str]) -> type[BaseModel]:
    """Exactly one paragraph per month, months named from the run's month list."""
    item = create_model("MonthReply", month=field(one_of(keys)), events=(str, Field(min_length=40, max_length=600)))
    return create_model("TimelineReply", months=field(list_of(item), Field(min_length=len(keys), max_length=len(keys))))


def check_month_keys(got: list[str], expected: list[str]) -> str | None:
    if got != expected:
        return f"months must be {', '.join(expected)} in this order (one paragraph each), got {', '.join(got)}"
    return None


class TimelineStep(Step):
    name = "timeline"
    title = "Timeline"
    spec = "§2.2"
    deps = ("profile",)
    output_model = Timeline
    prompt = "synth/timeline"

    def run(self, ctx: StepContext) -> Timeline:
        keys = [ctx.config.month_key(y, m) for y, m in ctx.config.month_list()]
        reply_model = timeline_reply(keys)

        def check(r: Any) -> str | None:
            got = [m.month for m in r.months]
            return check_month_keys(got, keys)

        profile = ctx.inputs["profile"].model_dump(by_alias=True, exclude_none=True)
        reply = ctx.ask("", self.prompt, {"language": language_name(ctx.config.lang),
                                          "profile": profile_text(profile), "months": dumps(keys)},
                        reply_model, check=check, max_tokens=250 + 300 * len(keys))
        return Timeline(months={m.month: m.events.strip() for m in reply.months})  # type: ignore[attr-defined]  # reply is the run-time model built by timeline_reply

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        keys = [config.month_key(y, m) for y, m in config.month_list()]
        problem = check_month_keys(list(output.months), keys)
        return [problem] if problem else []


def _repeated(texts: list[str], what: str) -> str | None:
    seen = set()
    for i, text in enumerate(texts, start=1):
        key = text.strip().lower()
        if key in seen:
            return Tolerable(f"{what} {i} repeats an earlier one word for word; write each one differently",
                             f"repeated {what.split(': ')[-1]}")
        seen.add(key)
    return None
