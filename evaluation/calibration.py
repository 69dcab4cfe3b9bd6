"""FairEval's third calibration, Human-in-the-Loop (Wang et al. 2023, "Large Language Models are not Fair
Evaluators", §3.3): people decide the items the judge is least sure of.

Each judged item (topic × aspect) has 2k verdicts — one per valid judge sample across both orders,
each ``A`` / ``tie`` / ``B`` from the sample's scores mapped back to the methods. Its *balanced position
diversity entropy* (BPDE) is the Shannon entropy (bits) of the shares of those verdicts: 0 when all 2k
agree, log2(3) ≈ 1.585 at most. Items whose judgment is invalid (an order without a valid sample)
are the most uncertain of all and rank first. A topic's uncertainty is the highest of its aspects'.
Topics of equal uncertainty are ordered by a seeded random draw (never by user id, which would send the lowest
user ids to review). BPDE only means something when the k samples of an order can differ: FairEval draws them
at temperature 1 (:data:`FAIREVAL_TEMPERATURE`: the default of ``pal judge --review-uncertain``; the Evaluate
page's calibration section asks for it), while Mem-PAL's code judges at 0 — where BPDE takes only 0 or 1
(:func:`sampling_note` says so).
The N most uncertain topics go to a blinded pairwise review batch (:func:`plan_calibration`);
the human majority of that batch then replaces the judge's decision on those items
(:func:`calibrate`), and the page shows win/tie/lose both as judged and as calibrated, with how many
items people decided and how often they overturned the judge.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from evaluation.aggregate import outcome_counts
from evaluation.faireval import Judgment
from evaluation.human_agreement import HumanVote, favoured_side
from evaluation.versions import METRIC_VERSIONS
from review.batches import BatchPlan, plan_batch

MAX_ENTROPY = math.log2(3)
FAIREVAL_TEMPERATURE = 1.0  # FairEval samples its k evidences at temperature 1


def verdicts(j: Judgment) -> list[str]:
    """``A`` / ``tie`` / ``B`` for every valid sample of both orders (scores already mapped to methods)."""
    return ["A" if s.score_a > s.score_b else "B" if s.score_a < s.score_b else "tie"  # type: ignore[operator]  # valid samples carry both scores
            for s in j.samples if s.ok]


def bpde(j: Judgment) -> float | None:
    """Entropy (bits) of the 2k verdicts; None when the judgment has no valid decision (ranked first)."""
    if j.decision == "invalid":
        return None
    counts = Counter(verdicts(j))
    n = sum(counts.values())
    return -sum(c / n * math.log2(c / n) for c in counts.values()) + 0.0  # + 0.0: no "-0.0"


@dataclass
class TopicUncertainty:
    """One judged topic of a method pair with its uncertainty per aspect (None: invalid judgment)."""

    user_id: str
    sample_id: str
    topic_key: str
    method_a: str
    method_b: str
    run_a: str
    run_b: str
    entropy: dict[str, float | None] = field(default_factory=dict)

    @property
    def score(self) -> float:
        """The topic's uncertainty: the largest aspect entropy, and above any entropy when an aspect is invalid."""
        return max((MAX_ENTROPY + 1 if e is None else e) for e in self.entropy.values())

    @property
    def key(self) -> tuple[str, str, str]:
        return self.user_id, self.sample_id, self.topic_key


def tie_break(seed: int, key: tuple[str, str, str]) -> str:
    """A topic's place among topics of equal uncertainty: a seeded draw, the same in every process."""
    return hashlib.sha1(f"{seed}|{'|'.join(key)}".encode()).hexdigest()


def rank_topics(judgments: Iterable[Judgment], seed: int = 0) -> list[TopicUncertainty]:
    """Judged topics, most uncertain first over the aspects present; equal uncertainty in a seeded random order."""
    topics: dict[tuple[str, str, str, str, str], TopicUncertainty] = {}
    for j in judgments:
        t = topics.setdefault((j.user_id, j.sample_id, j.topic_key, j.method_a, j.method_b),
                              TopicUncertainty(j.user_id, j.sample_id, j.topic_key, j.method_a, j.method_b,
                                               j.run_a, j.run_b))
        t.entropy[j.aspect] = bpde(j)
    return sorted(topics.values(), key=lambda t: (-t.score, tie_break(seed, t.key)))


def sampling_note(judgments: Iterable[Judgment]) -> str | None:
    """Why BPDE cannot rank these judgments well (None when their samples were drawn at a temperature > 0)."""
    temps = {j.judge_temperature for j in judgments}
    cold = sorted(t for t in temps if t is not None and t <= 0)
    if not cold:
        return None
    return (f"judged at temperature {cold[0]:g}: the k samples of an order are (nearly) identical, so each topic's "
            f"BPDE takes only 0 or 1 and most topics tie; FairEval samples at T = {FAIREVAL_TEMPERATURE:g} — judge again "
            f"at that temperature before sending topics to review")


def top_share(n_topics: int, share: float = 0.2) -> int:
    """How many topics the top ``share`` is (at least one when there are topics; FairEval's example: 20 %)."""
    return min(n_topics, max(1 if n_topics else 0, math.ceil(n_topics * share - 1e-9)))


# ---------------------------------------------------------------------------------------------- calibration


@dataclass
class Calibration:
    """Win/tie/lose of one aspect as judged and as calibrated by people (from method A's side)."""

    aspect: str
    judged: dict[str, float]
    calibrated: dict[str, float]
    decided_by_people: int = 0  # items whose calibrated decision is the human majority
    overturned: int = 0  # of those with a valid judge decision, where people decided otherwise
    judge_valid_decided: int = 0  # items decided by people that also had a valid judge decision
    splits: int = 0  # reviewed items without a human majority: the judge's decision stays
    rows: list[dict] = field(default_factory=list)

    @property
    def overturn_rate(self) -> float | None:
        return self.overturned / self.judge_valid_decided if self.judge_valid_decided else None


def calibrate(judgments: Sequence[Judgment], votes: Sequence[HumanVote], aspect: str) -> Calibration:
    """The human majority of ``votes`` (:class:`evaluation.human_agreement.HumanVote` of the calibration
    batches) replaces the judge's decision on the items people reviewed; every other item keeps its judgment."""
    mine = [j for j in judgments if j.aspect == aspect]
    by_item = {(v.user_id, v.sample_id, v.topic_key, frozenset(v.methods)): v for v in votes if v.aspect == aspect}
    cal = Calibration(aspect, outcome_counts([j.decision for j in mine]), {})
    final = []
    for j in mine:
        v = by_item.get((j.user_id, j.sample_id, j.topic_key, frozenset((j.method_a, j.method_b))))
        decision: str = j.decision
        if v is not None:
            if v.majority is None:
                cal.splits += 1
            else:
                decision = favoured_side(v.majority, j.method_a)
                cal.decided_by_people += 1
                if j.decision != "invalid":
                    cal.judge_valid_decided += 1
                    cal.overturned += decision != j.decision
            cal.rows.append({"user": j.user_id, "sample": j.sample_id, "topic": j.topic_key, "judge": j.decision,
                             "people": "split" if v.majority is None else decision, "annotators": len(v.votes),
                             "final": decision})
        final.append(decision)
    cal.calibrated = outcome_counts(final)
    return cal


def plan_calibration(title: str, dataset: str, ranked: Sequence[TopicUncertainty], n: int, seed: int, overlap: int,
                     annotators: list[str], guidelines: str | None = None) -> BatchPlan:
    """FairEval's human-in-the-loop calibration: a pairwise batch of the ``n`` most uncertain judged topics
    (``ranked`` most uncertain first, see :func:`evaluation.calibration.rank_topics`). It is an ordinary
    blinded pairwise batch — random item order, random A/B sides, no method names shown — whose data records
    the pair, each item's uncertainty and the calibration version, so its answers can calibrate the judge."""
    chosen = list(ranked)[: max(n, 0)]
    if not chosen:
        raise ValueError("no judged topics to send to review")
    pairs = {(t.method_a, t.method_b) for t in chosen}
    if len(pairs) != 1:
        raise ValueError("calibration topics must come from one judged method pair")
    (method_a, method_b), = pairs
    candidates = [(f"{t.user_id}/{t.sample_id}/{t.topic_key}", {
        "user_id": t.user_id, "sample_id": t.sample_id, "topic_key": t.topic_key, "method_a": method_a,
        "method_b": method_b, "run_a": t.run_a, "run_b": t.run_b}) for t in chosen]
    plan = plan_batch(title or f"Calibration: {len(chosen)} most uncertain topics", "pairwise", dataset, candidates,
                      len(candidates), seed, overlap, annotators, guidelines)
    plan.data["calibration"] = {
        "methods": [method_a, method_b], "version": METRIC_VERSIONS["faireval_calibration"],
        "uncertainty": {key: {"score": t.score, "entropy": t.entropy} for (key, _), t in zip(candidates, chosen)}}
    return plan
