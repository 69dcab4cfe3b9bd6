"""The synthesis steps in order, and the dependency graph that decides what an edit invalidates."""

from __future__ import annotations

from synth.steps.assemble import AssembleStep
from synth.steps.base import Step
from synth.steps.dialogues import DialoguesStep
from synth.steps.framework import CandidateSolutionsStep, RequirementFrameworkStep, SolutionPreferenceStep
from synth.steps.logs import LogsStep
from synth.steps.needs import PreferencesStep, RequirementTypesStep
from synth.steps.persona import ProfileStep, TimelineStep
from synth.steps.situations import DialogueChoiceStep, ExperienceStep, SituationsStep

STEPS: list[Step] = [
    ProfileStep(), TimelineStep(), RequirementTypesStep(), PreferencesStep(), SituationsStep(), ExperienceStep(),
    DialogueChoiceStep(), RequirementFrameworkStep(), CandidateSolutionsStep(), SolutionPreferenceStep(), LogsStep(),
    DialoguesStep(), AssembleStep(),
]
BY_NAME: dict[str, Step] = {s.name: s for s in STEPS}
NAMES: list[str] = [s.name for s in STEPS]


def get_step(name: str) -> Step:
    if name not in BY_NAME:
        raise KeyError(f"no synthesis step {name!r} (steps: {', '.join(NAMES)})")
    return BY_NAME[name]


def downstream(name: str) -> list[str]:
    """Every step that depends on ``name``, directly or through others, in run order (``name`` excluded)."""
    affected = {name}
    for step in STEPS:  # STEPS is topologically ordered, so one pass suffices
        if any(d in affected for d in step.deps):
            affected.add(step.name)
    return [n for n in NAMES if n in affected and n != name]


def _check_order() -> None:
    seen: set[str] = set()
    for step in STEPS:
        missing = [d for d in step.deps if d not in seen]
        if missing:
            raise RuntimeError(f"step {step.name} depends on {missing} which run later")
        seen.add(step.name)


_check_order()
