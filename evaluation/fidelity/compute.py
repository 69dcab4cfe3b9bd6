"""Fidelity of a built memory against the gold memory, session by session (definitions: :mod:`evaluation.fidelity`).

:func:`compute_fidelity` takes the method's snapshots (one per session, after its dialogue) and the
embedder to match statements with; it builds the gold snapshots itself (:func:`memory.methods.gold.gold_stages`),
embeds every distinct statement once, and then only slices similarity matrices per session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

from backends.embeddings import Embedder
from evaluation.bleu import bleu
from evaluation.fidelity import metrics as fm
from evaluation.fidelity import statements as fs
from evaluation.fidelity.misses import final_misses
from evaluation.fidelity.types import FidelityConfig, FidelityReport, SessionFidelity
from memory.methods import get_method_class
from memory.methods.gold import gold_stages
from memory.store import dialogue_stage
from memory.types import MemoryItem
from palset.dataset import User
from palset.vocab import ASPECTS

log = logging.getLogger(__name__)
Snapshot = dict[str, MemoryItem]


class StatementVectors:
    """Embeds each distinct statement text once (documents on both sides: the comparison is symmetric)."""

    def __init__(self, embedder: Embedder):
        self.embedder, self._dim = embedder, 0
        self._cache: dict[str, np.ndarray] = {}

    def add(self, texts: Sequence[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vectors = np.asarray(self.embedder.embed_documents(missing), dtype=np.float32)
            self._dim = vectors.shape[1]
            self._cache.update(zip(missing, vectors))

    def of(self, statements: Sequence[fs.Statement]) -> np.ndarray:
        self.add([s.text for s in statements])
        if not statements:
            return np.zeros((0, self._dim or 1), dtype=np.float32)
        return np.vstack([self._cache[s.text] for s in statements])

    def similarity(self, gold: Sequence[fs.Statement], method: Sequence[fs.Statement]) -> np.ndarray:
        if not gold or not method:
            return np.zeros((len(gold), len(method)), dtype=np.float32)
        return fm.cosine(self.of(gold), self.of(method))


class _Measure:
    """Everything one report needs while it walks the sessions."""

    def __init__(self, user: User, method: str, vectors: StatementVectors, threshold: float):
        cls = get_method_class(method)
        self.user, self.method, self.vectors, self.threshold = user, method, vectors, threshold
        self.layered = fs.is_layered(cls.layers)
        self.group_layer: str | None = cls.groups_logs_in
        self.unavailable: dict[str, str] = {}
        self.scopes: dict[str, str] = {}
        self._every: dict[int, tuple[Snapshot, list[fs.Statement]]] = {}
        self._explain()

    def every(self, snap: Snapshot) -> list[fs.Statement]:
        """:func:`statements.all_statements` of ``snap``, made once per snapshot (the text figures, the
        pre-embedding batch, the misses and, without layers, every candidate list read it)."""
        found = self._every.get(id(snap))
        if found is None:  # the snapshot is kept beside its statements, so its id is not reused meanwhile
            found = self._every[id(snap)] = (snap, fs.all_statements(snap))
        return found[1]

    def _explain(self) -> None:
        user, own = self.user, "its own layer" if self.layered else "every statement of the memory (text level)"
        if not user.situations:
            self.unavailable["situation"] = "needs situation/situation.json (the spans that place each log)"
            self.unavailable["preference"] = ("needs situation/situation.json (topic → requirement type) and "
                                              "preference/preference.json")
        elif self.group_layer is None:
            self.unavailable["situation"] = f"{self.method} does not group logs (no layer plays H²Memory's situations)"
        elif not user.preferences:
            self.unavailable["preference"] = "needs preference/preference.json"
        if user.profile is None and not user.situations:
            self.unavailable["background"] = "needs background/background.json or situation/situation.json"
        if not self.layered:
            self.unavailable["preference_precision"] = (f"{self.method} has no principle layer: precision of preferences "
                                                        "is not defined for it (see text precision)")
            self.unavailable["polarity_errors"] = f"{self.method} states no polarity (no principle layer)"
        self.scopes = {"situation": f"log groups of layer {self.group_layer!r}" if self.group_layer else "—",
                       "requirement": "topic outlines" if self.layered else own,
                       "preference": "principles" if self.layered else own,
                       "background": "the background item of each aspect" if self.layered else own,
                       "text": "every statement of every layer (log graph counts left out)"}

    def session(self, pos: int, gold: Snapshot, mine: Snapshot) -> SessionFidelity:
        s = self.user.sessions[pos]
        row = SessionFidelity(sample_id=s.sample_id, position=pos, split=s.split)
        self._situations(row, pos, gold, mine)
        self._requirements(row, gold, mine)
        self._preferences(row, gold, mine)
        self._background(row, gold, mine)
        g, m = self.every(gold), self.every(mine)
        sim = self.vectors.similarity(g, m)
        row.gold_statements, row.method_statements = len(g), len(m)
        row.text_recall = fm.recall(sim, self.threshold) if g else None
        row.text_precision = fm.precision(sim, self.threshold)
        return row

    def _situations(self, row: SessionFidelity, pos: int, gold: Snapshot, mine: Snapshot) -> None:
        gold_of = fs.log_labels(gold, "situation", "gold_situation")
        # every log so far that gold places in a situation (one forgotten at the user's request is left out)
        logs = [(s.sample_id, j) for s in self.user.sessions[:pos + 1] for j in range(len(s.logs))
                if (s.sample_id, j) in gold_of]
        row.logs = len(logs)
        if "situation" in self.unavailable or not logs:
            return
        mine_of = fs.log_labels(mine, self.group_layer or "")
        scores = fm.grouping_scores([gold_of[r] for r in logs],
                                    [mine_of.get(r, f"unassigned:{r[0]}:{r[1]}") for r in logs])
        if scores is not None:
            row.situation_ari, row.situation_nmi = scores

    def requirement_candidates(self, mine: Snapshot) -> list[fs.Statement]:
        return fs.requirement_statements(mine) if self.layered else self.every(mine)

    def _requirements(self, row: SessionFidelity, gold: Snapshot, mine: Snapshot) -> None:
        g, m = fs.requirement_statements(gold), self.requirement_candidates(mine)
        row.requirements = len(g)
        if not g:
            return
        sim = self.vectors.similarity(g, m)
        row.requirement_recall = fm.recall(sim, self.threshold)
        row.requirement_similarity = fm.mean_best(sim)
        row.requirement_bleu1 = float(np.mean([self._bleu1(st, m, sim[k]) for k, st in enumerate(g)]))

    def _bleu1(self, gold: fs.Statement, mine: list[fs.Statement], scores: np.ndarray) -> float:
        """BLEU-1 of a gold requirement against its best-matching statement (the best of equally similar ones)."""
        if not mine:
            return 0.0
        tied = np.flatnonzero(scores >= scores.max() - 1e-6)
        return max(bleu(gold.text, mine[int(i)].text, self.user.language, orders=(1,))[1] for i in tied)

    def preference_candidates(self, mine: Snapshot) -> list[fs.Statement]:
        return fs.preference_statements(mine) if self.layered else self.every(mine)

    def _preferences(self, row: SessionFidelity, gold: Snapshot, mine: Snapshot) -> None:
        if "preference" in self.unavailable:
            return
        g, m = fs.gold_preference_statements(gold), self.preference_candidates(mine)
        row.preferences = len(g)
        if not g:
            return
        sim = self.vectors.similarity(g, m)
        row.preference_recall = fm.recall(sim, self.threshold)
        if self.layered:
            row.preference_precision = fm.precision(sim, self.threshold)
            row.polarity_errors = fm.polarity_errors(sim, [s.polarity for s in g], [s.polarity for s in m],
                                                     self.threshold)
            row.polarity_known = sum(s.polarity is not None for s in m)

    def background_candidates(self, mine: Snapshot) -> dict[str, list[fs.Statement]]:
        if self.layered:
            return fs.background_statements(mine)
        return dict.fromkeys(ASPECTS, self.every(mine))

    def _background(self, row: SessionFidelity, gold: Snapshot, mine: Snapshot) -> None:
        if "background" in self.unavailable:
            return
        gold_by, mine_by = fs.background_statements(gold), self.background_candidates(mine)
        for aspect in ASPECTS:
            g = gold_by[aspect]
            row.background[aspect] = fm.recall(self.vectors.similarity(g, mine_by[aspect]), self.threshold) if g else None
        values = [v for v in row.background.values() if v is not None]
        row.background_coverage = float(np.mean(values)) if values else None


def compute_fidelity(user: User, method: str, snapshots: Sequence[Snapshot], embedder: Embedder, *,
                     config: FidelityConfig | None = None, dataset: str = "", build_id: str = "",
                     stages_done: int = 0, vectors: StatementVectors | None = None) -> FidelityReport:
    """Fidelity of ``snapshots`` (the method's memory after each session's dialogue, in session order; a prefix
    of the user's sessions when the build is unfinished) against the gold memory at the same sessions.

    ``vectors`` may be shared between calls with the same embedder (several methods of one user share most
    statements: the gold ones, and the raw logs and turns of every retrieval baseline)."""
    started = time.perf_counter()
    config = config or FidelityConfig()
    threshold = config.threshold_for(embedder.name)
    if vectors is None:
        vectors = StatementVectors(embedder)
    elif vectors.embedder.name != embedder.name:
        raise ValueError(f"statement vectors of embedder {vectors.embedder.name!r} cannot measure with {embedder.name!r}")
    gold = gold_stages(user)
    measure = _Measure(user, method, vectors, threshold)
    positions = range(min(len(snapshots), len(user.sessions)))
    golds = [gold[dialogue_stage(p)] for p in positions]
    texts = [st.text for snap in [*golds, *snapshots] for st in measure.every(snap)]
    texts += [st.text for snap in golds for st in fs.requirement_statements(snap) + fs.preference_statements(snap)]
    texts += [st.text for snap in snapshots for st in fs.requirement_statements(snap) + fs.preference_statements(snap)]
    vectors.add(texts)  # one batch: per-session matching then only reads the cache
    rows = [measure.session(p, golds[p], snapshots[p]) for p in positions]
    misses = final_misses(measure, golds[-1], snapshots[len(golds) - 1], config.max_misses) if golds else []
    cls = get_method_class(method)
    report = FidelityReport(dataset=dataset, user_id=user.uid, method=method, oracle=bool(cls.oracle),
                            layered=measure.layered, build_id=build_id, stages_done=stages_done,
                            embedder=embedder.name, threshold=threshold, config=config, sessions=rows, misses=misses,
                            unavailable=measure.unavailable, scopes=measure.scopes)
    report.seconds = round(time.perf_counter() - started, 3)
    log.info("fidelity of %s for user %s: %d session(s) in %.2f s", method, user.uid, len(rows), report.seconds)
    return report
