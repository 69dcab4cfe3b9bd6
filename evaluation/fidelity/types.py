"""Records of memory fidelity: the settings, one row of figures per session, the gold items a memory missed,
and the report that holds them (stored in the run store by :mod:`evaluation.fidelity.store`).

A figure that cannot be measured is ``None`` — never 0 — and the report's ``unavailable`` says why; every
table, export and leaderboard average shows it as "n/a" and leaves it out.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

from evaluation.fidelity.calibrated import CALIBRATIONS, FALLBACK_THRESHOLD
from evaluation.versions import METRIC_VERSIONS

GOLD_VERSION = "2"  # the gold builder's algorithm; bump when memory/methods/gold.py changes what it builds
METRIC_VERSION = METRIC_VERSIONS["memory_fidelity"]
DEFAULT_THRESHOLDS: dict[str, float] = {name: c.tau for name, c in CALIBRATIONS.items()}


class FidelityConfig(BaseModel):
    """How fidelity is measured; part of a stored result's key."""

    model_config = ConfigDict(extra="forbid")
    threshold: float | None = Field(None, ge=-1.0, le=1.0, description="cosine for a match; None: the embedder's")
    max_misses: int = Field(200, ge=0, description="missed text-level gold statements kept in a report")

    def threshold_for(self, embedder: str) -> float:
        if self.threshold is not None:
            return self.threshold
        return DEFAULT_THRESHOLDS.get(embedder, FALLBACK_THRESHOLD)

    def default_matcher(self, embedder: str) -> str:
        """The matcher a reader should take this embedder's figures from: the embedding's τ where it reaches a match
        precision of 0.9 against hard negatives (or τ was set by hand), else the judge."""
        cal = CALIBRATIONS.get(embedder)
        return "embedding" if self.threshold is not None or (cal is not None and cal.reaches) else "judge"

    def threshold_source(self, embedder: str) -> str:
        """Where τ comes from: set by hand, calibrated for this embedder (with its held-out ROC AUC), or a fallback."""
        if self.threshold is not None:
            return "set by hand"
        cal = CALIBRATIONS.get(embedder)
        if cal is None:
            return f"fallback {FALLBACK_THRESHOLD:g}: no calibration for embedder {embedder!r} (pal memory fidelity-threshold)"
        return cal.describe()


class SessionFidelity(BaseModel):
    """The figures of a memory as of one session (after its dialogue), against the gold memory then.

    ``None`` means "not measurable here" (no gold to compare, a layer the method does not have, a figure
    chance cannot be told from); the report's ``unavailable`` says why.
    """

    model_config = ConfigDict(extra="forbid")
    sample_id: str
    position: int
    split: str
    logs: int = 0  # logs whose grouping is compared (those gold places in a situation so far)
    # situation agreement on log pairs (Cohen's κ on the pair table = pairwise ARI), within and across sessions
    pairs_within: int = 0
    situation_within: float | None = None
    pairs_across: int = 0
    situation_across: float | None = None
    situation_cross_merges: float | None = None  # share of cross-session pairs the method groups together
    # v1 figures (pooled over every log so far: rewarded session boundaries); kept so old reports still read
    situation_ari: float | None = None
    situation_nmi: float | None = None
    requirements: int = 0
    requirement_recall: float | None = None
    requirement_precision: float | None = None
    requirement_f1: float | None = None
    requirement_similarity: float | None = None
    requirement_bleu1: float | None = None
    preferences: int = 0
    preference_recall: float | None = None
    preference_precision: float | None = None
    preference_f1: float | None = None
    polarity_errors: int | None = None
    polarity_known: int = 0  # the method's preference statements that state a polarity
    background: dict[str, float | None] = Field(default_factory=dict)  # aspect → coverage
    background_coverage: float | None = None  # mean over aspects with gold text
    background_precision: float | None = None
    background_f1: float | None = None
    gold_statements: int = 0
    method_statements: int = 0
    method_distinct: int | None = None  # distinct statements (repeats by the match decision left out; v3 on)
    source_statements: int = 0  # sentences of the logs and turns ingested so far
    text_recall: float | None = None
    text_precision: float | None = None
    text_f1: float | None = None
    text_grounded: float | None = None  # share of the memory's statements matching gold or the source
    text_noise: float | None = None  # share matching neither: invented or garbled


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
    # the precision side (fidelity v3; None in reports judged before): the memory's distinct topic outlines and
    # principles, each judged against gold's closest statements
    precision_prompt_version: str | None = None
    precision_statements: int = 0
    supported: int = 0
    precision_invalid: int = 0
    precision: float | None = None
    f1: float | None = None
    support: list[dict] = Field(default_factory=list)  # memory statement, layer, evidence, verdict, reason


class FidelityReport(BaseModel):
    """Fidelity of one build of one method (or of a reference memory) for one user, session by session."""

    model_config = ConfigDict(extra="forbid")
    fidelity_key: str = ""  # what was measured (build, its snapshots, embedder, settings, gold version)
    dataset: str
    user_id: str
    method: str  # a memory method, or a reference ("ref:…", evaluation.fidelity.references)
    oracle: bool = False
    layered: bool  # has H²Memory's layers (situation, background, topic_outline, principle)
    build_id: str
    stages_done: int
    embedder: str
    threshold: float
    threshold_source: str = ""  # how τ was chosen (calibration data and held-out ROC AUC)
    threshold_auc: float | None = None  # held-out ROC AUC of the embedder's match decision at calibration
    match_precision: float | None = None  # held-out match precision at τ against hard negatives (same user, aspect)
    default_matcher: str = "embedding"  # "judge" where the embedder cannot reach a match precision of 0.9
    config: FidelityConfig
    gold_version: str = "1"
    metric_version: str = "1"  # evaluation.versions "memory_fidelity" (reports stored before it say 1)
    history_sessions: int | None = None  # the user's history sessions (the headline is the last of them)
    sessions: list[SessionFidelity] = Field(default_factory=list)
    misses: list[Miss] = Field(default_factory=list)  # as of the headline session
    unavailable: dict[str, str] = Field(default_factory=dict)  # metric → why it is not measured
    scopes: dict[str, str] = Field(default_factory=dict)  # metric → which of the method's items it compares with
    judge: JudgeFidelity | None = None
    seconds: float = 0.0
    created_at: float = Field(default_factory=time.time)

    @property
    def final(self) -> SessionFidelity | None:
        return self.sessions[-1] if self.sessions else None

    @property
    def headline(self) -> SessionFidelity | None:
        """The session the headline figures are read at: the last *history* session measured (gold holds no
        query session's situation or topics, so a query session compares with a gold that knows less)."""
        history = [s for s in self.sessions if s.split == "history"]
        return history[-1] if history else None

    @property
    def headline_complete(self) -> bool:
        """Whether the headline is the user's last history session (not an unfinished build's latest)."""
        h = self.headline
        return h is not None and self.history_sessions is not None and \
            sum(s.split == "history" for s in self.sessions) >= self.history_sessions

    @property
    def stale(self) -> str | None:
        """Why the figures follow an older definition (None when current)."""
        if self.metric_version != METRIC_VERSION or self.gold_version != GOLD_VERSION:
            return (f"measured under fidelity v{self.metric_version} with gold v{self.gold_version} (now v"
                    f"{METRIC_VERSION}, gold v{GOLD_VERSION}): measure again")
        return None


# The columns a leaderboard and the CLI summary show (figure → definition in evaluation.fidelity.DEFINITIONS).
HEADLINE = ("situation_within", "situation_across", "situation_cross_merges",
            "requirement_recall", "requirement_precision", "requirement_f1", "requirement_bleu1",
            "preference_recall", "preference_precision", "preference_f1", "polarity_errors",
            "background_coverage", "background_precision", "background_f1",
            "text_recall", "text_precision", "text_f1", "text_grounded", "text_noise")
LOWER_IS_BETTER = frozenset({"situation_cross_merges", "polarity_errors", "text_noise"})
