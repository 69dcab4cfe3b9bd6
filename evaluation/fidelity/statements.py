"""Memory items as *statements*: the sentence-sized units fidelity matches, gold against a method.

A statement is one sentence (or one line of a bulleted memory) of an item's text, stripped of list
markers, log timestamps and "user:"/"assistant:" prefixes. The same splitter serves gold and methods,
so a gold memory compared with itself matches statement for statement.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.sentences import MIN_CHARS, split_sentences
from memory.types import MemoryItem
from palset.vocab import ASPECTS

H2_LAYERS = ("situation", "background", "topic_outline", "principle")
# figure → the layer whose statements alone give its precision (a memory without that layer: n/a)
LAYER_OF = {"requirement": "topic_outline", "preference": "principle", "background": "background"}
NON_CONTENT_LAYERS = frozenset({"log_graph"})  # counts of relations, not things the user did or said
Snapshot = dict[str, MemoryItem]
__all__ = ["MIN_CHARS", "split_sentences"]  # re-exported: part of the statements vocabulary


@dataclass(frozen=True)
class Statement:
    text: str
    source: str  # the item id it comes from
    layer: str
    aspect: str | None = None
    polarity: str | None = None  # pos | neg | None (not stated)


def _split(item: MemoryItem, text: str, polarity: str | None = None) -> list[Statement]:
    aspect = item.meta.get("aspect") if item.layer == "background" else None
    return [Statement(s, item.id, item.layer, aspect, polarity) for s in split_sentences(text)]


def is_layered(layers: tuple[str, ...] | list[str]) -> bool:
    """Whether a method keeps H²Memory's four content layers (so layer-to-layer metrics apply)."""
    return set(H2_LAYERS) <= set(layers)


def all_statements(items: dict[str, MemoryItem]) -> list[Statement]:
    """Every content statement of a memory (the text-level metrics)."""
    return [s for i in _ordered(items) if i.layer not in NON_CONTENT_LAYERS for s in _split(i, i.text)]


def requirement_statements(items: dict[str, MemoryItem]) -> list[Statement]:
    """One statement per topic outline: its (refined or gold) requirement, whole."""
    return [Statement(i.text.strip(), i.id, i.layer) for i in _ordered(items)
            if i.layer == "topic_outline" and i.text.strip()]


def preference_statements(items: dict[str, MemoryItem]) -> list[Statement]:
    """Sentences of the principles: with their polarity where the item states it (``meta.pos`` / ``meta.neg``)."""
    out: list[Statement] = []
    for item in _ordered(items):
        if item.layer != "principle":
            continue
        if isinstance(item.meta.get("pos"), str) or isinstance(item.meta.get("neg"), str):
            out += _split(item, item.meta.get("pos") or "", "pos") + _split(item, item.meta.get("neg") or "", "neg")
        else:
            out += _split(item, str(item.meta.get("principle") or item.text))
    return out


def background_statements(items: dict[str, MemoryItem]) -> dict[str, list[Statement]]:
    """Sentences of each background aspect's item."""
    out: dict[str, list[Statement]] = {a: [] for a in ASPECTS}
    for item in _ordered(items):
        if item.layer == "background" and item.meta.get("aspect") in out:
            out[item.meta["aspect"]] += _split(item, item.text)
    return out


def gold_preference_statements(items: dict[str, MemoryItem]) -> list[Statement]:
    """The gold pos/neg preferences of every requirement type met so far, sentence by sentence."""
    return [s for s in preference_statements(items) if s.polarity is not None]


def log_labels(items: Snapshot, layer: str, key: str | None = None) -> dict[tuple[str, int], str]:
    """(sample id, log index) → the group (item id, or ``meta[key]``) of the first ``layer`` item citing that log."""
    out: dict[tuple[str, int], str] = {}
    for item in sorted((i for i in items.values() if i.layer == layer), key=lambda i: i.id):
        label = str(item.meta.get(key)) if key else item.id
        for ref in item.provenance:
            kind, _, rest = ref.partition(":")
            sid, _, j = rest.rpartition(":")
            if kind == "log" and j.isdigit():
                out.setdefault((sid, int(j)), label)
    return out


def _ordered(items: dict[str, MemoryItem]) -> list[MemoryItem]:
    return sorted(items.values(), key=lambda i: (i.session_index, i.id))
