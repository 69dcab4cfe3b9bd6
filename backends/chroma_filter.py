"""Which vectors of one Chroma collection a metadata filter selects, worked out in this process.

Chroma evaluates a ``where`` range (``{"valid_from": {"$lte": 3}}``) on an index of every collection's metadata
at once, so a filtered query costs more the more collections the file holds: 2–3 ms of CPU with one user's
collections, 10–16 ms with forty users' (measured with Chroma 1.5 on two cores), while the same query restricted to
ids stays near 1 ms. A memory build asks a filtered query for each retrieval (each version of an item is searchable
only for the sessions it is valid in, :mod:`memory.index`), so a protocol run's CPU per call grew with its users.

:class:`MetadataMirror` keeps the ids and metadata of one collection (read once from Chroma, then kept in step with
the writes made through the same :class:`backends.vectorstore.ChromaStore`) and turns a ``where`` into the ids it
selects with numpy, following Chroma's rules for the operators the app uses: ``$and``, ``$or``, equality, ``$eq``,
``$ne``, ``$lt``, ``$lte``, ``$gt``, ``$gte``, ``$in`` and ``$nin`` on integers and strings (a vector without the
key matches only ``$ne`` and ``$nin``, as in Chroma). Anything else (floats, booleans, document filters) raises
:class:`Unsupported`, and the store lets Chroma filter. The ids a filter selects are kept until the mirror's next write
(every turn of a dialogue retrieves with the same filter).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

SELECTIONS_KEPT = 64  # filters whose ids a mirror keeps until its next write (a dialogue's turns repeat theirs)
_COMPARE = {"$eq": np.equal, "$lt": np.less, "$lte": np.less_equal, "$gt": np.greater, "$gte": np.greater_equal}


class Unsupported(ValueError):
    """A filter this module does not evaluate (Chroma does)."""


def _kind(value: Any) -> str:
    """``int`` or ``str``: the metadata types a mirrored filter compares (bool is not an int here, as in Chroma)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise Unsupported(f"a filter value of type {type(value).__name__}")
    return "int" if isinstance(value, int) else "str"


def keep_sparse_targets(collection: Any) -> None:
    """Make a Chroma collection object work out its sparse-embedding targets once per schema it holds.

    Chroma (1.5) reads them on every upsert by deserializing the collection's whole stored schema, which validates
    each embedding function's signature: more CPU than the rest of the upsert. The schema changes only when the
    collection object's stored schema is replaced (a configuration change makes a new one), so the targets are
    kept with the schema object they came from and worked out again when it is another. A Chroma without that
    method is left as it is."""
    original = getattr(collection, "_get_sparse_embedding_targets", None)
    if original is None or not hasattr(collection, "_model"):
        log.debug("Chroma collection %r has no sparse-embedding targets to keep", collection)
        return
    kept: list[tuple[Any, Any]] = []  # [(the stored schema the targets came from, the targets)]
    lock = threading.Lock()

    def targets() -> Any:
        schema = collection._model.serialized_schema
        with lock:
            if kept and kept[0][0] is schema:
                return kept[0][1]
        found = original()
        with lock:
            kept[:] = [(schema, found)]  # the schema object is held, so its id is never another's
        return found

    collection._get_sparse_embedding_targets = targets


class MetadataMirror:
    """The ids and metadata of one collection; :meth:`select` is what a ``where`` selects of them."""

    def __init__(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any] | None]):
        self.lock = threading.Lock()
        self._ids: list[str] = list(ids)
        # a write replaces a vector's dict, never changes it, so Chroma's own dicts are kept as they came
        self._metas: list[dict[str, Any]] = [m if type(m) is dict else dict(m or {}) for m in metadatas]
        self._pos = {i: n for n, i in enumerate(self._ids)}
        self._columns: dict[tuple[str, str], np.ndarray] = {}
        self._selections: OrderedDict[str, list[str]] = OrderedDict()  # filter → ids, until the next write

    @classmethod
    def load(cls, collection: Any) -> MetadataMirror:
        """Every id and metadata of a Chroma collection (one read of the collection)."""
        got = collection.get(include=["metadatas"])
        return cls(got["ids"], got["metadatas"] or [])

    def __len__(self) -> int:
        return len(self._ids)

    # ---------------------------------------------------------------- kept in step with writes

    def merge(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]], add: bool = True) -> None:
        """Chroma's upsert (``add``) or update of these ids: their metadata merged key by key; an update of an id
        the collection lacks changes nothing."""
        with self.lock:
            for id_, meta in zip(ids, metadatas):
                n = self._pos.get(id_)
                if n is None:
                    if not add:
                        continue
                    self._pos[id_] = len(self._ids)
                    self._ids.append(id_)
                    self._metas.append(dict(meta))
                else:
                    self._metas[n] = {**self._metas[n], **meta}
            self._changed()

    def remove(self, ids: Sequence[str]) -> None:
        with self.lock:
            gone = set(ids)
            kept = [(i, m) for i, m in zip(self._ids, self._metas) if i not in gone]
            self._ids, self._metas = [i for i, _ in kept], [m for _, m in kept]
            self._pos = {i: n for n, i in enumerate(self._ids)}
            self._changed()

    def _changed(self) -> None:
        """What was worked out from the metadata goes with a write (the caller holds the lock)."""
        self._columns.clear()
        self._selections.clear()

    # ---------------------------------------------------------------- filtering

    def select(self, where: dict[str, Any]) -> list[str]:
        """The ids ``where`` selects, in the collection's order; :class:`Unsupported` for a filter it cannot read."""
        key = json.dumps(where, sort_keys=True, default=repr)
        with self.lock:
            if (ids := self._selections.get(key)) is None:
                ids = [self._ids[n] for n in np.flatnonzero(self._mask(where))]
                self._selections[key] = ids
                while len(self._selections) > SELECTIONS_KEPT:
                    self._selections.popitem(last=False)
            else:
                self._selections.move_to_end(key)
            return list(ids)

    def _mask(self, where: dict[str, Any]) -> np.ndarray:
        mask = np.ones(len(self._ids), dtype=bool)
        for key, cond in where.items():
            if key in ("$and", "$or") and (not isinstance(cond, list) or len(cond) < 2):
                raise Unsupported(f"{key} of fewer than two filters")  # Chroma refuses it: it says why
            if isinstance(cond, dict) and len(cond) != 1:
                raise Unsupported("several operators in one expression")
            if key == "$and":
                for sub in cond:
                    mask &= self._mask(sub)
            elif key == "$or":
                either = np.zeros(len(self._ids), dtype=bool)
                for sub in cond:
                    either |= self._mask(sub)
                mask &= either
            elif key.startswith("$"):
                raise Unsupported(f"the operator {key}")
            else:
                op, value = next(iter(cond.items())) if isinstance(cond, dict) else ("$eq", cond)
                mask &= self._clause(key, op, value)
        return mask

    def _clause(self, key: str, op: str, value: Any) -> np.ndarray:
        if op in ("$in", "$nin"):
            values = list(value)
            kinds = {_kind(v) for v in values}
            if len(kinds) > 1:
                raise Unsupported(f"{op} over values of several types")
            if not values:
                found = np.zeros(len(self._ids), dtype=bool)
            else:
                column = self._column(key, kinds.pop())
                found = np.isin(column, values) if column.dtype != object else np.fromiter(
                    (v in set(values) for v in column), dtype=bool, count=len(column))
            return ~found if op == "$nin" else found
        kind = _kind(value)
        if op == "$ne":
            return ~self._clause(key, "$eq", value)
        if op not in _COMPARE or (kind == "str" and op != "$eq"):
            raise Unsupported(f"{op} on a {kind}")
        column = self._column(key, kind)
        if kind == "str":
            return np.fromiter((v == value for v in column), dtype=bool, count=len(column))
        with np.errstate(invalid="ignore"):
            return np.asarray(_COMPARE[op](column, value), dtype=bool)

    def _column(self, key: str, kind: str) -> np.ndarray:
        """One key's values of every vector: floats (NaN where the key is missing or not an int, so no comparison
        matches it) or strings (None there)."""
        if (key, kind) not in self._columns:
            values = [m.get(key) for m in self._metas]
            if kind == "int":
                self._columns[(key, kind)] = np.array(
                    [float(v) if isinstance(v, int) and not isinstance(v, bool) else np.nan for v in values],
                    dtype=float)
            else:
                self._columns[(key, kind)] = np.array([v if isinstance(v, str) else None for v in values],
                                                      dtype=object)
        return self._columns[(key, kind)]
