"""Vector index of a memory build, snapshot-aware: each item version is searchable only for the
sessions in which it is valid (``valid_from ≤ k < valid_to``, kept as Chroma metadata)."""

from __future__ import annotations

from typing import Any

from backends.vectorstore import Namespace, VectorStore
from memory.types import MemoryItem

OPEN = 10**9


class VectorIndex:
    def __init__(self, store: VectorStore, dataset: str, user: str, build_id: str):
        self.store, self.dataset, self.user, self.build_id = store, dataset, user, build_id

    def ns(self, layer: str) -> Namespace:
        return Namespace(self.dataset, self.user, self.build_id, layer)

    @staticmethod
    def vector_id(item: MemoryItem, valid_from: int) -> str:
        return f"{item.id}@{valid_from}"

    def add(self, items: list[MemoryItem], valid_from: int) -> None:
        self.add_versions([(i, valid_from, None) for i in items])

    @staticmethod
    def _metadata(item: MemoryItem, valid_from: int, valid_to: int | None) -> dict[str, Any]:
        return {"item_id": item.id, "session_index": item.session_index, "valid_from": valid_from,
                "valid_to": OPEN if valid_to is None else valid_to,
                **{k: v for k, v in item.meta.items() if isinstance(v, (str, int, float, bool))}}

    def add_versions(self, versions: list[tuple[MemoryItem, int, int | None]]) -> None:
        """Index versions, each valid from ``valid_from`` until ``valid_to`` (None: still valid); one upsert a layer."""
        by_layer: dict[str, list[tuple[MemoryItem, int, int | None]]] = {}
        for version in versions:
            by_layer.setdefault(version[0].layer, []).append(version)
        for layer, group in by_layer.items():
            self.store.upsert(self.ns(layer), [self.vector_id(i, start) for i, start, _ in group],
                              [i.text for i, _, _ in group], [self._metadata(i, start, end) for i, start, end in group])

    def count(self, layer: str) -> int:
        return self.store.count(self.ns(layer))

    def close(self, items: list[MemoryItem], opened_at: dict[str, int], index: int) -> None:
        """Versions replaced or deleted at session ``index`` stop matching from then on."""
        by_layer: dict[str, list[MemoryItem]] = {}
        for item in items:
            by_layer.setdefault(item.layer, []).append(item)
        for layer, group in by_layer.items():
            ids = [self.vector_id(i, opened_at[i.id]) for i in group]
            self.store.update_metadata(self.ns(layer), ids, [{"valid_to": index} for _ in ids])

    def search(self, layer: str, query: str, k: int, as_of: int, where: dict[str, Any] | None = None,
               exclude: set[str] | None = None) -> list[tuple[str, float]]:
        """(item id, cosine) of the best ``k`` items of ``layer`` valid right after session ``as_of``."""
        clauses: list[dict[str, Any]] = [{"valid_from": {"$lte": as_of}}, {"valid_to": {"$gt": as_of}}]
        if where:
            clauses += [{key: value} for key, value in where.items()]
        exclude = exclude or set()
        hits = self.store.query(self.ns(layer), query, k=k + len(exclude), where={"$and": clauses})
        out = [(h.metadata["item_id"], h.score) for h in hits if h.metadata.get("item_id") not in exclude]
        return out[:k]

    def forget(self, items: list[MemoryItem]) -> None:
        """Remove every version of these items from the index."""
        for item in items:
            self.store.delete(self.ns(item.layer), where={"item_id": item.id})
