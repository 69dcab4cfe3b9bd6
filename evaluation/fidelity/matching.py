"""The match decision of fidelity: two statements match when the cosine of their embeddings (the same embedder
on both sides, both embedded as documents) reaches that embedder's threshold τ.

:func:`statement_matches` is the one public decision ("match decided as in evaluation.fidelity"), for other
measures that compare a text with a gold statement (the simulator's fidelity, reviews); :func:`match_scores`
gives the cosines of many pairs at once. τ per embedder: :func:`threshold_for` (calibrated on held-out pairs,
:mod:`evaluation.fidelity.threshold`; the figures in :mod:`evaluation.fidelity.calibrated`).

:class:`StatementVectors` embeds each distinct text once; its vectors are kept in a process-wide cache per
embedder object (bounded), so measuring several methods of a user — or the same user again — embeds the shared gold,
log and turn sentences once.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from backends.embeddings import Embedder
from evaluation.fidelity.calibrated import CALIBRATIONS, FALLBACK_THRESHOLD

CACHE_TEXTS = 200_000  # vectors kept per embedder in this process


class _HasText(Protocol):
    @property
    def text(self) -> str: ...


def threshold_for(embedder: str) -> float:
    """The calibrated τ of an embedder (by name), or the fallback for one without a calibration."""
    cal = CALIBRATIONS.get(embedder)
    return cal.tau if cal is not None else FALLBACK_THRESHOLD


class _Cache:
    """text → vector per embedder *object* (held weakly: the cache lives as long as the embedder), least recently
    added dropped first beyond ``CACHE_TEXTS``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by: weakref.WeakKeyDictionary[object, OrderedDict[str, np.ndarray]] = weakref.WeakKeyDictionary()

    def get(self, embedder: object, texts: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            table = self._table(embedder, create=False)
            return {t: table[t] for t in texts if t in table} if table is not None else {}

    def put(self, embedder: object, vectors: dict[str, np.ndarray]) -> None:
        with self._lock:
            table = self._table(embedder, create=True)
            if table is None:
                return
            table.update(vectors)
            while len(table) > CACHE_TEXTS:
                table.popitem(last=False)

    def _table(self, embedder: object, create: bool) -> OrderedDict[str, np.ndarray] | None:
        try:
            table = self._by.get(embedder)
            if table is None and create:
                table = self._by[embedder] = OrderedDict()
            return table
        except TypeError:  # an embedder that cannot be weakly referenced is not cached
            return None

    def clear(self) -> None:
        with self._lock:
            self._by.clear()


VECTOR_CACHE = _Cache()


class StatementVectors:
    """Embeds each distinct statement text once (documents on both sides: the comparison is symmetric).

    ``shared``: use the process-wide cache of this embedder object's vectors."""

    def __init__(self, embedder: Embedder, shared: bool = True):
        self.embedder, self._dim, self.shared = embedder, 0, shared
        self._cache: dict[str, np.ndarray] = {}

    def add(self, texts: Sequence[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing and self.shared:
            found = VECTOR_CACHE.get(self.embedder, missing)
            self._cache.update(found)
            missing = [t for t in missing if t not in found]
        if missing:
            vectors = np.asarray(self.embedder.embed_documents(missing), dtype=np.float32)
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # unit: cosine = dot
            new = dict(zip(missing, vectors))
            self._cache.update(new)
            if self.shared:
                VECTOR_CACHE.put(self.embedder, new)
        if self._cache and not self._dim:
            self._dim = next(iter(self._cache.values())).shape[0]

    def of(self, statements: Sequence[_HasText]) -> np.ndarray:
        self.add([s.text for s in statements])
        if not statements:
            return np.zeros((0, self._dim or 1), dtype=np.float32)
        return np.vstack([self._cache[s.text] for s in statements])

    def similarity(self, gold: Sequence[_HasText], method: Sequence[_HasText]) -> np.ndarray:
        """Cosine of every gold statement (rows) with every method statement (columns)."""
        if not gold or not method:
            return np.zeros((len(gold), len(method)), dtype=np.float32)
        return np.clip(self.of(gold) @ self.of(method).T, -1.0, 1.0)


class _Text:
    def __init__(self, text: str):
        self.text = text


def match_scores(statements: Sequence[str], gold: Sequence[str], embedder: Embedder) -> np.ndarray:
    """Cosine of every statement (rows) with every gold statement (columns), as fidelity computes it."""
    vectors = StatementVectors(embedder)
    return vectors.similarity([_Text(s) for s in statements], [_Text(g) for g in gold])


def statement_matches(statement: str, gold: str, embedder: Embedder, threshold: float | None = None) -> bool:
    """Whether ``statement`` matches the gold statement ``gold``: the cosine of their ``embedder`` embeddings
    (both as documents) is at least ``threshold`` (default: the embedder's calibrated τ, :func:`threshold_for`).
    Fidelity's recall, precision and misses make exactly this decision for every pair they compare."""
    tau = threshold_for(embedder.name) if threshold is None else threshold
    return bool(match_scores([statement], [gold], embedder)[0, 0] >= tau)
