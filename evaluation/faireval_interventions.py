"""Each arm's interventions beside FairEval outcomes: how many of the simulated user turns of the runs a judgment
compares were asked again, composed from the model's decision or sent as the user query.

A judgment records them when it is made (``Judgment.interventions``); one made before they were recorded gets them
from its stored runs (what those runs still say: :func:`sim.interventions.summarise`), and says so. The Evaluate
board shows them beside win/tie/lose and can keep only the judgments whose two runs are under a share the user
chooses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Literal

from evaluation.faireval import Judgment
from sim.interventions import Interventions, summarise
from sim.types import RunRecord

log = logging.getLogger(__name__)

Share = Literal["composed_share", "intervention_share"]
SHARES: dict[str, str] = {"composed_share": "composed from the decision",
                          "intervention_share": "intervened in (asked again, composed or the user query)"}
ARMS = ("a", "b")


def with_interventions(judgments: Sequence[Judgment],
                       load_run: Callable[[str], RunRecord]) -> tuple[list[Judgment], int]:
    """(the judgments, each with both arms' interventions; how many were filled from their stored runs because the
    judgment was made before they were recorded). A run that cannot be loaded leaves that judgment without them."""
    out, derived = [], 0
    cache: dict[str, Interventions | None] = {}

    def of_run(run_id: str) -> Interventions | None:
        if run_id not in cache:
            try:
                cache[run_id] = summarise(load_run(run_id).utterances)
            except KeyError as e:
                log.warning("interventions of judged run %s: the run is not stored (%s)", run_id, e)
                cache[run_id] = None
        return cache[run_id]

    for j in judgments:
        if all(arm in j.interventions for arm in ARMS):
            out.append(j)
            continue
        a, b = of_run(j.run_a), of_run(j.run_b)
        if a is not None and b is not None:
            j = j.model_copy(update={"interventions": {"a": a, "b": b}})
            derived += 1
        out.append(j)
    return out, derived


def pooled(judgments: Sequence[Judgment]) -> dict[str, Interventions]:
    """Each arm's interventions over the distinct runs of ``judgments`` (a run judged on two aspects counts once)."""
    runs: dict[str, dict[str, Interventions]] = {arm: {} for arm in ARMS}
    for j in judgments:
        for arm, run_id in zip(ARMS, (j.run_a, j.run_b)):
            if arm in j.interventions:
                runs[arm][run_id] = j.interventions[arm]
    out = {}
    for arm in ARMS:
        total = Interventions()
        for one in runs[arm].values():
            total = total + one
        out[arm] = total
    return out


def under_share(judgments: Sequence[Judgment], share: Share, limit: float) -> tuple[list[Judgment], int]:
    """(the judgments whose two runs each have ``share`` at most ``limit``; how many had no interventions to read,
    left out)."""
    kept, unknown = [], 0
    for j in judgments:
        if not all(arm in j.interventions for arm in ARMS):
            unknown += 1
            continue
        values = [getattr(j.interventions[arm], share) for arm in ARMS]
        if all(v is None or v <= limit + 1e-12 for v in values):
            kept.append(j)
    return kept, unknown
