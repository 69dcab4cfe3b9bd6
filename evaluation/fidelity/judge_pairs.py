"""The judge matcher measured the way the embedders are (:mod:`evaluation.fidelity.threshold`): on the calibration
pairs of held-out users — a requirement beside one of its own needs (matched) or beside a need of another topic of the
same user and aspect (the hard negative) — the judge reads the requirement as a fact and the other text as the
memory's one line (the prompt of :mod:`evaluation.fidelity.judge`); "stated" is a match.

Why: where no embedder reaches a match precision of 0.9 against hard negatives the judge is the default reading of
fidelity (:mod:`.calibrated`), so the judge must show on the same pairs that it tells one need from another. Nothing
here is tuned: the judge and its prompt are used as the fidelity judge uses them, and the pairs are the calibration's
own (the same seed), a balanced sample of each kind where ``limit`` is given.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from backends.llm.client import LLMClient
from backends.prompts import load_prompt
from evaluation.fidelity.judge import PROMPT, VerdictOut
from evaluation.fidelity.threshold import HARD, MIN_PRECISION, Pair

log = logging.getLogger(__name__)
MATCHED = "matched"
Progress = Callable[[int, int], None]


class JudgePairScore(BaseModel):
    """The judge matcher's figures on calibration pairs; every verdict kept with its pair."""

    model_config = ConfigDict(extra="forbid")
    judge_model: str
    prompt_version: str
    matched: int  # matched pairs judged
    hard_negatives: int  # hard-negative pairs judged
    true_matches: int  # matched pairs judged "stated"
    false_matches: int  # hard negatives judged "stated"
    invalid: int  # pairs with no valid verdict (counted as no match, and reported)
    verdicts: list[dict]

    @property
    def precision(self) -> float | None:
        """Matched pairs called a match over all pairs called a match (matched and hard negatives)."""
        called = self.true_matches + self.false_matches
        return self.true_matches / called if called else None

    @property
    def tpr(self) -> float | None:
        return self.true_matches / self.matched if self.matched else None

    @property
    def hard_fpr(self) -> float | None:
        return self.false_matches / self.hard_negatives if self.hard_negatives else None

    @property
    def reaches(self) -> bool:
        return (self.precision or 0.0) >= MIN_PRECISION

    def report(self) -> dict:
        """The record with its figures, as the CLI's JSON prints it."""
        return {**self.model_dump(), "precision": self.precision, "tpr": self.tpr, "hard_fpr": self.hard_fpr,
                "reaches": self.reaches}


def sample_pairs(pairs: Sequence[Pair], limit: int | None, seed: int = 0) -> list[Pair]:
    """The matched and hard-negative pairs, at most ``limit`` of each kind (a seeded draw), in their order."""
    chosen: set[int] = set()
    for kind in (MATCHED, HARD):
        idx = [i for i, p in enumerate(pairs) if p.kind == kind]
        if limit is not None and len(idx) > limit:
            idx = random.Random(f"{seed}:{kind}").sample(idx, limit)
        chosen.update(idx)
    return [p for i, p in enumerate(pairs) if i in chosen]


def judge_pairs(llm: LLMClient, pairs: Sequence[Pair], progress: Progress | None = None) -> JudgePairScore:
    """Ask the fidelity judge about each pair (matched and hard negatives only); a failed call is logged, counted as
    invalid and the rest go on."""
    prompt = load_prompt(PROMPT)
    judged = [p for p in pairs if p.kind in (MATCHED, HARD)]
    verdicts: list[dict] = []
    for n, p in enumerate(judged, 1):
        messages = prompt.messages(kind="requirement", statement=p.a, evidence=f"- {p.b}")
        try:
            out = llm.structured("judge", messages, VerdictOut, prompt=prompt, cache_salt="fidelity-judge-pairs")
            verdict = out.value.verdict if out.ok else "invalid"
            if not out.ok:
                log.warning("judge matcher gave no valid verdict on a %s pair of user %s: %s", p.kind, p.user,
                            out.errors[-1][:200] if out.errors else "")
        except Exception:  # an endpoint failure on one pair: logged, counted as invalid, the others still judged
            log.exception("judge matcher call failed on a %s pair of user %s", p.kind, p.user)
            verdict = "invalid"
        verdicts.append({"user": p.user, "kind": p.kind, "fact": p.a, "line": p.b, "verdict": verdict})
        if progress:
            progress(n, len(judged))
    stated = [v for v in verdicts if v["verdict"] == "stated"]
    return JudgePairScore(
        judge_model=llm.config.role("judge").model, prompt_version=prompt.version,
        matched=sum(v["kind"] == MATCHED for v in verdicts), hard_negatives=sum(v["kind"] == HARD for v in verdicts),
        true_matches=sum(v["kind"] == MATCHED for v in stated), false_matches=sum(v["kind"] == HARD for v in stated),
        invalid=sum(v["verdict"] == "invalid" for v in verdicts), verdicts=verdicts)
