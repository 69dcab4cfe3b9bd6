"""Fidelity of a memory against the gold memory, session by session (definitions: :mod:`evaluation.fidelity`).

:func:`compute_fidelity` takes the memory's snapshots (one per session, after its dialogue) — a method's build or
a reference memory (:mod:`evaluation.fidelity.references`), measured alike — and the embedder to match
statements with; it builds the gold snapshots itself (:func:`memory.methods.gold.gold_stages`) and the source
(every log and turn so far) for grounding, embeds every distinct statement once, and then only slices
similarity matrices per session.
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
from evaluation.fidelity.matching import StatementVectors
from evaluation.fidelity.misses import final_misses
from evaluation.fidelity.references import REFERENCES, Shape, source_snapshots
from evaluation.fidelity.types import (
    GOLD_VERSION,
    METRIC_VERSION,
    FidelityConfig,
    FidelityReport,
    SessionFidelity,
)
from memory.methods import get_method_class
from memory.methods.gold import gold_stages
from memory.store import dialogue_stage
from memory.types import MemoryItem
from palset.dataset import User
from palset.vocab import ASPECTS

log = logging.getLogger(__name__)
Snapshot = dict[str, MemoryItem]
MAX_TIED = 16  # equally similar statements a gold requirement's BLEU-1 is taken over
__all__ = ["Snapshot", "StatementVectors", "compute_fidelity", "shape_of"]


def shape_of(method: str) -> Shape:
    """The layout of a method (from its class) or of a reference memory."""
    if method in REFERENCES:
        return REFERENCES[method].shape
    cls = get_method_class(method)
    return Shape(method, tuple(cls.layers), cls.groups_logs_in, bool(cls.oracle))


class _Measure:
    """Everything one report needs while it walks the sessions."""

    def __init__(self, user: User, shape: Shape, vectors: StatementVectors, threshold: float):
        self.user, self.method, self.vectors, self.threshold = user, shape.name, vectors, threshold
        self.layered = fs.is_layered(shape.layers)
        self.has = {figure: layer in shape.layers for figure, layer in fs.LAYER_OF.items()}
        self.group_layer: str | None = shape.groups_logs_in
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
            self.unavailable["polarity_errors"] = f"{self.method} states no polarity (no principle layer)"
        for figure, layer in fs.LAYER_OF.items():
            if not self.has[figure]:
                why = (f"{self.method} has no {layer} layer: a {figure} precision can only come from that layer's "
                       "statements (recall reads every statement; the text figures are separate)")
                self.unavailable[f"{figure}_precision"] = self.unavailable[f"{figure}_f1"] = why
        self.scopes = {"situation": f"log groups of layer {self.group_layer!r}" if self.group_layer else "—",
                       "requirement": "topic outlines" if self.has["requirement"] else own,
                       "preference": "principles" if self.has["preference"] else own,
                       "background": "the background item of each aspect" if self.has["background"] else own,
                       "precision": "each layer's own distinct statements (a statement matching one kept before it "
                                    "counts once); n/a for a layer the memory does not have",
                       "text": "every statement of every layer (log graph counts left out); grounding against "
                               "every log and turn so far"}

    def session(self, pos: int, gold: Snapshot, mine: Snapshot, source: Snapshot) -> SessionFidelity:
        s = self.user.sessions[pos]
        row = SessionFidelity(sample_id=s.sample_id, position=pos, split=s.split)
        self._situations(row, pos, gold, mine)
        self._text(row, gold, mine, source)
        self._requirements(row, gold, mine)
        self._preferences(row, gold, mine)
        self._background(row, gold, mine)
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
        within, across = fm.session_pairs([gold_of[r] for r in logs],
                                          [mine_of.get(r, f"unassigned:{r[0]}:{r[1]}") for r in logs],
                                          [r[0] for r in logs])
        row.pairs_within, row.situation_within = within.pairs, within.kappa()
        row.pairs_across, row.situation_across = across.pairs, across.kappa()
        row.situation_cross_merges = across.merge_rate()

    def _text(self, row: SessionFidelity, gold: Snapshot, mine: Snapshot, source: Snapshot) -> None:
        g, m, src = self.every(gold), self.every(mine), self.every(source)
        sim = self.vectors.similarity(g, m)
        row.gold_statements, row.method_statements, row.source_statements = len(g), len(m), len(src)
        row.text_recall = fm.recall(sim, self.threshold) if g else None
        kept = self.distinct(m)
        row.method_distinct = len(kept)
        row.text_precision = fm.precision(sim[:, kept], self.threshold)
        row.text_f1 = fm.f1(row.text_recall, row.text_precision)
        if m:
            mine_kept = [m[int(i)] for i in kept]
            in_gold = fm.best_matches(sim[:, kept].T).hits(self.threshold) if g else np.zeros(len(kept), dtype=bool)
            in_source = fm.best_matches(self.vectors.similarity(mine_kept, src)).hits(self.threshold)
            row.text_grounded = float((in_gold | in_source).mean())
            row.text_noise = 1.0 - row.text_grounded

    def distinct(self, mine: list[fs.Statement]) -> np.ndarray:
        """Indices of the distinct statements of ``mine`` (repeats by the match decision left out)."""
        return fm.distinct(self.vectors.similarity(mine, mine), self.threshold)

    def _layer_precision(self, figure: str, sim: np.ndarray, mine: list[fs.Statement]) -> float | None:
        """Precision of the layer's own distinct statements; None for a memory without the layer."""
        return fm.precision(sim[:, self.distinct(mine)], self.threshold) if self.has[figure] else None

    def requirement_candidates(self, mine: Snapshot) -> list[fs.Statement]:
        return fs.requirement_statements(mine) if self.has["requirement"] else self.every(mine)

    def _requirements(self, row: SessionFidelity, gold: Snapshot, mine: Snapshot) -> None:
        g, m = fs.requirement_statements(gold), self.requirement_candidates(mine)
        row.requirements = len(g)
        if not g:
            return
        sim = self.vectors.similarity(g, m)
        row.requirement_recall = fm.recall(sim, self.threshold)
        row.requirement_precision = self._layer_precision("requirement", sim, m)
        row.requirement_f1 = self._f1("requirement", row.requirement_recall, row.requirement_precision)
        row.requirement_similarity = fm.mean_best(sim)
        row.requirement_bleu1 = float(np.mean([self._bleu1(st, m, sim[k]) for k, st in enumerate(g)]))

    def _f1(self, figure: str, recall: float | None, precision: float | None) -> float | None:
        """F1 of a layer the memory has; None (n/a) for one it does not have, whatever its recall."""
        return fm.f1(recall, precision) if self.has[figure] else None

    def _bleu1(self, gold: fs.Statement, mine: list[fs.Statement], scores: np.ndarray) -> float:
        """BLEU-1 of a gold requirement against its best-matching statement (the best of the first ``MAX_TIED``
        equally similar ones)."""
        if not mine:
            return 0.0
        tied = np.flatnonzero(scores >= scores.max() - 1e-6)[:MAX_TIED]
        return max(bleu(gold.text, mine[int(i)].text, self.user.language, orders=(1,))[1] for i in tied)

    def preference_candidates(self, mine: Snapshot) -> list[fs.Statement]:
        return fs.preference_statements(mine) if self.has["preference"] else self.every(mine)

    def _preferences(self, row: SessionFidelity, gold: Snapshot, mine: Snapshot) -> None:
        if "preference" in self.unavailable:
            return
        g, m = fs.gold_preference_statements(gold), self.preference_candidates(mine)
        row.preferences = len(g)
        if not g:
            return
        sim = self.vectors.similarity(g, m)
        row.preference_recall = fm.recall(sim, self.threshold)
        row.preference_precision = self._layer_precision("preference", sim, m)
        row.preference_f1 = self._f1("preference", row.preference_recall, row.preference_precision)
        if self.layered:
            row.polarity_known = sum(s.polarity is not None for s in m)
            if row.polarity_known:  # a memory whose principles state no polarity cannot err: n/a, never 0
                row.polarity_errors = fm.polarity_errors(sim, [s.polarity for s in g], [s.polarity for s in m],
                                                         self.threshold)

    def background_candidates(self, mine: Snapshot) -> dict[str, list[fs.Statement]]:
        if self.has["background"]:
            return fs.background_statements(mine)
        return dict.fromkeys(ASPECTS, self.every(mine))

    def _background(self, row: SessionFidelity, gold: Snapshot, mine: Snapshot) -> None:
        if "background" in self.unavailable:
            return
        gold_by, mine_by = fs.background_statements(gold), self.background_candidates(mine)
        hits = stated = 0
        for aspect in ASPECTS:
            g = gold_by[aspect]
            sim = self.vectors.similarity(g, mine_by[aspect])
            row.background[aspect] = fm.recall(sim, self.threshold) if g else None
            if self.has["background"] and mine_by[aspect]:
                kept = self.distinct(mine_by[aspect])
                stated += len(kept)
                hits += int(fm.best_matches(sim[:, kept].T).hits(self.threshold).sum()) if g else 0
        values = [v for v in row.background.values() if v is not None]
        row.background_coverage = float(np.mean(values)) if values else None
        if row.background_coverage is None:
            return
        row.background_precision = hits / stated if stated else None
        row.background_f1 = self._f1("background", row.background_coverage, row.background_precision)

    def explain_headline(self, row: SessionFidelity | None) -> None:
        """Why the headline's missing figures are missing (beside the file- and layer-level reasons)."""
        if row is None:
            return
        if row.logs and "situation" not in self.unavailable:
            if row.situation_within is None:
                self.unavailable["situation_within"] = ("gold puts every pair of logs of a session in one situation "
                                                        "(or no session has two logs): nothing to agree on beyond chance")
            if row.situation_across is None:
                self.unavailable["situation_across"] = ("no gold situation spans two sessions: every cross-session "
                                                        "pair is apart in gold, so only the method's cross-session "
                                                        "merges (lower is better) are counted")
        if self.layered and row.preferences and row.polarity_errors is None:
            self.unavailable["polarity_errors"] = (f"no principle of {self.method} states a polarity (pos/neg): "
                                                   "a liked thing kept as disliked cannot be told apart here")
        if row.method_statements == 0:
            self.unavailable["precision"] = f"{self.method} states nothing here: precision, grounding and noise are n/a"


def compute_fidelity(user: User, method: str, snapshots: Sequence[Snapshot], embedder: Embedder, *,
                     config: FidelityConfig | None = None, dataset: str = "", build_id: str = "",
                     stages_done: int = 0, vectors: StatementVectors | None = None,
                     shape: Shape | None = None) -> FidelityReport:
    """Fidelity of ``snapshots`` (the memory after each session's dialogue, in session order; a prefix of the
    user's sessions when the build is unfinished) against the gold memory at the same sessions.

    ``vectors`` may be shared between calls with the same embedder (several methods of one user share most
    statements: the gold ones, and the raw logs and turns of every retrieval baseline and of the source)."""
    started = time.perf_counter()
    config = config or FidelityConfig()
    threshold = config.threshold_for(embedder.name)
    if vectors is None:
        vectors = StatementVectors(embedder)
    elif vectors.embedder.name != embedder.name:
        raise ValueError(f"statement vectors of embedder {vectors.embedder.name!r} cannot measure with {embedder.name!r}")
    shape = shape or shape_of(method)
    gold, source = gold_stages(user), source_snapshots(user)
    measure = _Measure(user, shape, vectors, threshold)
    positions = range(min(len(snapshots), len(user.sessions)))
    golds = [gold[dialogue_stage(p)] for p in positions]
    texts = [st.text for snap in [*golds, *snapshots[:len(golds)], *source[:len(golds)]] for st in measure.every(snap)]
    texts += [st.text for snap in [*golds, *snapshots] for st in fs.requirement_statements(snap)
              + fs.preference_statements(snap)]
    vectors.add(texts)  # one batch: per-session matching then only reads the cache
    rows = [measure.session(p, golds[p], snapshots[p], source[p]) for p in positions]
    report = FidelityReport(dataset=dataset, user_id=user.uid, method=method, oracle=shape.oracle,
                            layered=measure.layered, build_id=build_id, stages_done=stages_done,
                            embedder=embedder.name, threshold=threshold,
                            threshold_source=config.threshold_source(embedder.name),
                            threshold_auc=_auc(config, embedder.name), match_precision=_precision(config, embedder.name),
                            default_matcher=config.default_matcher(embedder.name), config=config,
                            gold_version=GOLD_VERSION,
                            metric_version=METRIC_VERSION, history_sessions=len(user.history), sessions=rows)
    head = report.headline
    measure.explain_headline(head)
    if head is not None:
        report.misses = final_misses(measure, golds[head.position], snapshots[head.position], config.max_misses)
    report.unavailable, report.scopes = measure.unavailable, measure.scopes
    report.seconds = round(time.perf_counter() - started, 3)
    log.info("fidelity of %s for user %s: %d session(s) in %.2f s", method, user.uid, len(rows), report.seconds)
    return report


def _auc(config: FidelityConfig, embedder: str) -> float | None:
    from evaluation.fidelity.calibrated import CALIBRATIONS

    cal = CALIBRATIONS.get(embedder)
    return cal.auc if cal is not None and config.threshold is None else None


def _precision(config: FidelityConfig, embedder: str) -> float | None:
    from evaluation.fidelity.calibrated import CALIBRATIONS

    cal = CALIBRATIONS.get(embedder)
    return cal.match_precision if cal is not None and config.threshold is None else None
