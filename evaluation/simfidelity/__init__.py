"""Simulator fidelity: is the simulated user the user the dataset describes? Per turn, per run and per simulator.

FairEval and the single-turn tasks measure the assistant, memory fidelity the memory; this measures the third
instrument of every result, the User-LLM. For every query topic PAL-Set holds what other simulator studies lacked:
the user's hidden requirement, the candidate solutions with the user's verdicts, the pos/neg preferences and the
dataset's own dialogue of the topic. Each simulated user turn is checked against them (:mod:`.checks`, records
in :mod:`.types`); a run's and a simulator's figures come from the checks (:mod:`.aggregate`). Definitions and
thresholds, and what each reproduces: FIDELITY.md, "Simulator fidelity".
"""

from __future__ import annotations

from evaluation.simfidelity.registry import CHECK_DEFINITIONS, CHECK_LABELS, CHECKS, CHECKS_VERSION, REGISTRY
from evaluation.simfidelity.types import NO_GOLD, RunFidelity, SimFidelityConfig

FIGURE_DEFINITIONS: dict[str, str] = {
    "acceptance_rate": "Share of verdicts on proposals matching a pos/neg candidate that accept.",
    "implied_acceptance": "Share of those proposals whose candidate is pos: the acceptance the gold implies.",
    "over_cooperation": "Acceptance rate − implied acceptance (> 0: the simulator accepts what the user would not).",
    "disliked_acceptance": "Share of verdicts on proposals matching a neg (disliked) candidate that accept: "
                           "over-cooperation where it shows (0 for a user who keeps their preferences).",
    "verdict_consistency": "Share of checked verdicts agreeing with the gold candidate's label.",
    "truthful_rate": "Share of checked confirmations that are truthful.",
    "vagueness_gap": "Mean over first turns of cos(turn, query) − max cos(turn, requirement or need).",
    "vague_rate": "Share of first turns passing the vagueness check.",
    "persona_rate": "Share of checked turns in persona.",
    "schedule_adherence": "Share of checked turns whose text performs the scheduled act.",
    "decision_agreement": "Share of decided turns whose words the text-reading classifier reads as the decision.",
    "on": "kept: the figures on the turns as sent; first drafts: the same checks on each turn's first draft, where "
          "it is known (turns stored before drafts were kept only when their first draft was sent).",
    "intervention_share": "Share of simulated user turns asked again, composed from the decision or sent as the "
                          "user query.",
    "composed_share": "Share of simulated user turns composed from the model's decision (its words are fixed ones).",
    "length": "Tokens per user turn: two-sample Kolmogorov–Smirnov D against the dataset's own user turns of the "
              "same topics, with its p-value.",
    "questions": "Questions per user turn: difference of means against the dataset's own turns, Mann–Whitney U p.",
    "first_person": "Share of turns in the first person: difference against the dataset's own turns, Fisher's exact p.",
}

__all__ = ["CHECKS", "CHECKS_VERSION", "CHECK_DEFINITIONS", "CHECK_LABELS", "REGISTRY", "FIGURE_DEFINITIONS", "NO_GOLD", "RunFidelity",
           "SimFidelityConfig"]
