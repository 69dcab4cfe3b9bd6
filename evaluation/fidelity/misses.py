"""What a memory lost, item by item, as of the last session measured: the gold requirements, preferences,
background sentences and text statements it holds nothing close to, preferences it remembers with the
wrong polarity, and gold situations whose logs it split apart or merged with others."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from evaluation.fidelity import metrics as fm
from evaluation.fidelity import statements as fs
from evaluation.fidelity.types import Miss
from memory.types import MemoryItem


class Similarity(Protocol):
    def similarity(self, gold: Sequence[fs.Statement], method: Sequence[fs.Statement]) -> np.ndarray: ...


class Measure(Protocol):
    """What the misses need of the measurement walking the sessions (``compute._Measure``; named here so this
    module does not import the one that imports it)."""

    threshold: float
    unavailable: dict[str, str]
    group_layer: str | None

    @property
    def vectors(self) -> Similarity: ...

    def every(self, snap: Snapshot) -> list[fs.Statement]: ...

    def requirement_candidates(self, snap: Snapshot) -> list[fs.Statement]: ...

    def preference_candidates(self, snap: Snapshot) -> list[fs.Statement]: ...

    def background_candidates(self, snap: Snapshot) -> dict[str, list[fs.Statement]]: ...

Snapshot = dict[str, MemoryItem]


def _unmatched(measure: Measure, layer: str, gold: list[fs.Statement], mine: list[fs.Statement],
               limit: int | None = None) -> list[Miss]:
    sim = measure.vectors.similarity(gold, mine)
    best = fm.best_matches(sim)
    hits = best.hits(measure.threshold)
    flipped = fm.polarity_flags(sim, [s.polarity for s in gold], [s.polarity for s in mine], measure.threshold)
    out = []
    for g, (i, score, hit) in enumerate(zip(best.index, best.score, hits)):
        st = gold[g]
        other = mine[int(i)] if i >= 0 else None
        if not hit:
            kind = "missed"
        elif flipped[g]:
            kind = "polarity"
        else:
            continue
        out.append(Miss(layer=layer, kind=kind, gold_id=st.source, text=st.text, polarity=st.polarity,
                        aspect=st.aspect, best_score=None if other is None else round(float(score), 4),
                        best_text=other.text if other is not None else ""))
    out.sort(key=lambda m: (m.best_score is not None, m.best_score or 0.0))
    return out[:limit] if limit is not None else out


def _grouping(measure: Measure, gold: Snapshot, mine: Snapshot) -> list[Miss]:
    """Gold situations whose logs the method spread over several groups (split) or shares with others (merged)."""
    if "situation" in measure.unavailable or measure.group_layer is None:
        return []
    gold_of = fs.log_labels(gold, "situation", "gold_situation")
    mine_of = fs.log_labels(mine, measure.group_layer)
    groups_of: dict[str, set[str]] = defaultdict(set)
    golds_in: dict[str, set[str]] = defaultdict(set)
    for ref, g in gold_of.items():
        m = mine_of.get(ref, f"unassigned:{ref}")
        groups_of[g].add(m)
        golds_in[m].add(g)
    texts = {str(i.meta.get("gold_situation")): i for i in gold.values() if i.layer == "situation"}
    out = []
    for key, groups in sorted(groups_of.items()):
        item = texts.get(key)
        merged = any(len(golds_in[m]) > 1 for m in groups)
        if len(groups) > 1 or merged:
            kind = "split" if len(groups) > 1 else "merged"
            out.append(Miss(layer="situation", kind=kind, gold_id=item.id if item else key,
                            text=item.text if item else key, best_text=f"{len(groups)} group(s) of the memory; "
                            f"{'shared with other gold situations' if merged else 'not shared'}"))
    return out


def final_misses(measure: Measure, gold: Snapshot, mine: Snapshot, max_text: int) -> list[Miss]:
    """Every miss of the last snapshot, layer by layer (text-level misses capped at ``max_text``, worst first)."""
    out = _grouping(measure, gold, mine)
    out += _unmatched(measure, "requirement", fs.requirement_statements(gold), measure.requirement_candidates(mine))
    if "preference" not in measure.unavailable:
        out += _unmatched(measure, "preference", fs.gold_preference_statements(gold),
                          measure.preference_candidates(mine))
    if "background" not in measure.unavailable:
        mine_by = measure.background_candidates(mine)
        for aspect, statements in fs.background_statements(gold).items():
            out += _unmatched(measure, "background", statements, mine_by[aspect])
    out += _unmatched(measure, "text", measure.every(gold), measure.every(mine), max_text)
    return out
