"""Parsed memory views, kept by (build, stage) and the build's revision, so stored items are parsed once.

A retrieval reads the memory as of one stage, and every turn of a dialogue reads the same stage: parsing its items
from the run store each time was most of a retrieval's time. A build's stages read the memory before them, which
the previous stage's commit has just written. :class:`ViewCache` keeps each view with the revision of its build it
was read at (:data:`REVISION_SQL`: every write that can change what a stage shows moves the revision), serves it
while the revision is the same, and, when a stage is committed on top of a view it holds, works out the next view
from the stage's changes and re-keys the views the commit leaves as they were (every stage before it), so a build
reads its items from the database once.

The items are shared between readers and never changed in place (a change is a new version).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from memory.types import MemoryItem

# What a build's stored memory is as of now: a committed stage moves ``updated_at``; a version added or replaced the
# items' count and newest rowid (an import only adds rows); a forget the forgotten rows' count and newest rowid; a
# person's edit its edit row's id.
REVISION_SQL = (
    "SELECT (SELECT updated_at FROM memory_builds WHERE build_id=:b), "
    "(SELECT count(*) FROM memory_items WHERE build_id=:b), (SELECT max(rowid) FROM memory_items WHERE build_id=:b), "
    "(SELECT count(*) FROM memory_forgotten WHERE build_id=:b), "
    "(SELECT max(rowid) FROM memory_forgotten WHERE build_id=:b), "
    "(SELECT max(id) FROM memory_item_edits WHERE build_id=:b)")
ITEMS = 1  # the revision's count of item versions
FORGOTTEN = 3  # …and of forgotten items
VIEWS_KEPT = 128  # (build, stage) views kept: every build a run's units read at once, with room to spare

Revision = tuple


@dataclass(frozen=True)
class View:
    """The memory right after one stage: every version valid then as (valid from, item) in the store's order
    (valid from, item id), the forgotten ids, and the items a reader sees (the forgotten ones left out)."""

    rows: tuple[tuple[int, MemoryItem], ...]
    hidden: frozenset[str]

    @property
    def items(self) -> list[MemoryItem]:
        return [item for _, item in self.rows if item.id not in self.hidden]

    def after(self, index: int, closed: set[str], added: Iterable[MemoryItem]) -> View:
        """This view with stage ``index``'s commit applied: the versions it closed gone, its new ones in."""
        rows = [row for row in self.rows if row[1].id not in closed] + [(index, item) for item in added]
        return View(tuple(sorted(rows, key=lambda r: (r[0], r[1].id))), self.hidden)


EMPTY = View((), frozenset())


class ViewCache:
    """Views by (build, stage) with the revision each was read at; the least recently used go first."""

    def __init__(self, size: int = VIEWS_KEPT):
        self.size = size
        self._kept: OrderedDict[tuple[str, int], tuple[Revision, View]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int], revision: Revision) -> View | None:
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[0] != revision:
                return None
            self._kept.move_to_end(key)
            return kept[1]

    def put(self, key: tuple[str, int], revision: Revision, view: View) -> None:
        with self._lock:
            self._put(key, revision, view)

    def _put(self, key: tuple[str, int], revision: Revision, view: View) -> None:
        self._kept[key] = (revision, view)
        self._kept.move_to_end(key)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

    def committed(self, build_id: str, index: int, before: Revision, after: Revision, latest: int,
                  closed: set[str], added: list[MemoryItem]) -> None:
        """Stage ``index`` was committed, moving the build from revision ``before`` to ``after``; ``latest`` was the
        build's last stage before it (``-1``: none), ``closed`` the items whose current version it closed, ``added``
        the versions it opened. Views of the stages before ``index`` stay as they are; the view of ``index`` follows
        from the one before it when the commit extends the build's last stage and that view is held."""
        with self._lock:
            base = self._kept.get((build_id, index - 1))
            if latest == index - 1 and index == 0 and before[ITEMS] == 0 and before[FORGOTTEN] == 0:
                base = (before, EMPTY)
            for (b, stage), (revision, view) in list(self._kept.items()):
                if b == build_id and stage < index and revision == before:
                    self._kept[(b, stage)] = (after, view)  # unchanged: a commit changes no earlier stage
            if latest == index - 1 and base is not None and base[0] == before:
                self._put((build_id, index), after, base[1].after(index, closed, added))
