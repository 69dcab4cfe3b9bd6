"""Act schedules: the PAL-Set fixed schedule (from ``dialogue_template.json`` or derived the same way) and free mode."""

from __future__ import annotations

import random

from palset.dataset import Dataset
from palset.vocab import Act

Schedule = list[tuple[Act, Act]]


def derived_schedule(seed: str) -> Schedule:
    """The fixed schedule of the multi-turn task (Mem-PAL §1.13): 2 requirement-prediction rounds, then 2 solution
    proposals, each optionally followed by one discussion round (decided by ``seed``): 5–7 turns."""
    rng = random.Random(seed)
    turns: Schedule = [
        (Act.TOPIC_INQUIRY, Act.REQUIREMENT_PREDICTION),
        (Act.REQUIREMENT_CONFIRMATION, Act.REQUIREMENT_PREDICTION),
        (Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_PROPOSAL),
    ]
    for proposal in (1, 2):
        if rng.random() < 0.5:
            turns.append((Act.SOLUTION_DISCUSSION, Act.SOLUTION_DISCUSSION))
        turns.append((Act.SOLUTION_FEEDBACK, Act.SOLUTION_PROPOSAL if proposal == 1 else Act.FEEDBACK_RESPONSE))
    return turns


def fixed_schedule(dataset: Dataset, task_id: str) -> tuple[Schedule, str]:
    """(schedule, source): the dataset's template for this topic when it has one, else the derived schedule."""
    template = dataset.templates.get(task_id)
    if template:
        return [(t.user, t.assistant) for t in template], "dialogue_template.json"
    return derived_schedule(task_id), "derived (Mem-PAL fixed schedule, seeded by the task id)"


def next_assistant_act(user_act: Act, predictions: int, proposals: int) -> Act:
    """Free mode: the assistant's act follows the user's (the same grammar as the fixed schedule)."""
    if user_act is Act.TOPIC_INQUIRY:
        return Act.REQUIREMENT_PREDICTION
    if user_act is Act.REQUIREMENT_CONFIRMATION:
        return Act.REQUIREMENT_PREDICTION if predictions < 2 else Act.SOLUTION_PROPOSAL
    if user_act is Act.SOLUTION_DISCUSSION:
        return Act.SOLUTION_DISCUSSION
    return Act.SOLUTION_PROPOSAL if proposals < 2 else Act.FEEDBACK_RESPONSE
