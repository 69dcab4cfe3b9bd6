"""Records of simulator fidelity: the settings, one check of one simulated user turn with its evidence, a run's
checks with its figures, and the reference features of the dataset's own user turns (stored in the run store by
:mod:`evaluation.simfidelity.store`)."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evaluation.simfidelity.registry import CHECKS, CHECKS_VERSION
from sim.interventions import Interventions

CheckName = Literal["vague", "truthful", "verdict", "persona", "act", "decision"]
Outcome = Literal["pass", "fail", "n/a"]
NO_GOLD = "n/a — no gold"
__all__ = ["CHECKS", "CHECKS_VERSION", "CheckName", "NO_GOLD", "Outcome", "RunFidelity", "SimFidelityConfig",
           "TurnCheck", "TurnChecks"]


class SimFidelityConfig(BaseModel):
    """How a run's simulated user is checked; part of a stored result's key."""

    model_config = ConfigDict(extra="forbid")
    threshold: float | None = Field(None, ge=-1.0, le=1.0, description="cosine for a match; None: the embedder's τ")
    classifier: Literal["rule", "learned", "cascade", "judge"] = Field(
        "rule", description="what reads the stance of confirmations and verdicts nobody structured: an instrument of "
                            "evaluation.simfidelity.stance_instruments (the rules, the learned model, the cascade of "
                            "both, or the judge role)")
    persona_judge: bool = Field(False, description="ask the judge role whether a turn contradicts the profile "
                                                   "where it states facts about the user (rules cannot decide that)")


class TurnCheck(BaseModel):
    """One check of one simulated user turn: its outcome, why, and the evidence it rests on."""

    model_config = ConfigDict(extra="forbid")
    check: CheckName
    outcome: Outcome
    reason: str  # one sentence, for the badge's tooltip and the CLI
    evidence: dict[str, Any] = Field(default_factory=dict)  # similarities, matched candidate, judge's raw answer…


class TurnChecks(BaseModel):
    """Every check of one user turn."""

    model_config = ConfigDict(extra="forbid")
    turn_no: int
    act: str  # the act the turn was written in (the schedule's)
    text: str
    features: dict[str, float] = Field(default_factory=dict)  # textstats.features: length, questions, first_person
    checks: list[TurnCheck] = Field(default_factory=list)

    def get(self, name: str) -> TurnCheck | None:
        return next((c for c in self.checks if c.check == name), None)


class RunFidelity(BaseModel):
    """Simulator fidelity of one run: every user turn's checks, the run's figures and the dataset's own user turns
    of the topic (their features, for the distribution distances), so a leaderboard needs no other record."""

    model_config = ConfigDict(extra="forbid")
    key: str = ""
    run_id: str
    dataset: str
    user_id: str
    sample_id: str
    topic_key: str
    method: str
    mode: str
    simulator: str  # llm, llm+style, replay, always-accept, random-verdict
    simulator_model: str  # the user_simulator model for llm; the reference simulator's name otherwise
    status: str  # the run's status when checked
    utterances: int  # the run's stored utterances when checked
    embedder: str
    threshold: float
    config: SimFidelityConfig
    checks_version: str = CHECKS_VERSION
    rulebook: str = ""  # sim.rulebook.rulebook_version() of the rules it was checked under ("": before checks v7)
    no_gold: str | None = None  # why nothing could be checked (then every figure is n/a — no gold)
    unavailable: dict[str, str] = Field(default_factory=dict)  # check → why it has no gold in this run
    turns: list[TurnChecks] = Field(default_factory=list)
    figures: dict[str, float | None] = Field(default_factory=dict)  # aggregate.run_figures
    counts: dict[str, int] = Field(default_factory=dict)  # denominators of the figures
    reference: list[dict[str, float]] = Field(default_factory=list)  # features of the dataset's own user turns
    # the same checks on the model's first drafts (turns whose first draft is known: sim.interventions.first_draft),
    # and what intervened in the run's turns; empty in a result made before checks v6
    first_drafts: list[TurnChecks] = Field(default_factory=list)
    figures_first: dict[str, float | None] = Field(default_factory=dict)
    counts_first: dict[str, int] = Field(default_factory=dict)
    interventions: Interventions | None = None
    judge_model: str | None = None
    seconds: float = 0.0
    created_at: float = Field(default_factory=time.time)

    @property
    def passed(self) -> bool | None:
        """Every applicable check of every turn passed; None when nothing was checkable (no gold)."""
        outcomes = [c.outcome for t in self.turns for c in t.checks if c.outcome != "n/a"]
        return None if not outcomes else all(o == "pass" for o in outcomes)

    def turn(self, turn_no: int) -> TurnChecks | None:
        return next((t for t in self.turns if t.turn_no == turn_no), None)
