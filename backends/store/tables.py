"""Row-level access to the run store's tables for workspace bundles (:mod:`studio.bundle`).

Stores know their own records; a bundle moves records of every kind between homes without knowing them,
so this store reads and inserts rows of any table by name. Table and column names come from the
bundle registry and are checked against the database's own schema (``PRAGMA table_info``) before any
statement uses them; values always travel as parameters.

:meth:`TableStore.merge` is the one write: every table of an import in a single immediate transaction,
each row inserted only when no row with its key exists, and a child row (a build's stages, a run's turns)
only when its parent was inserted by this same merge — a record already present is kept exactly as it
is, never half-mixed with a copy. Any error rolls the whole merge back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from backends.store.db import Database


class SchemaMismatch(ValueError):
    """A table or column the database does not have."""


@dataclass(frozen=True)
class MergeStep:
    """Rows of one table to insert. ``key``: the columns that make two rows the same record; ``link``: when
    set, (column, parent tables) — a row goes in only if its value in that column is the key of a row this
    merge inserted into one of the parent tables (parents come first in the step list)."""

    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    rows: Sequence[dict]
    link: tuple[str, tuple[str, ...]] | None = None


@dataclass
class MergeCounts:
    added: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)


CHUNK = 5000  # values per IN list (SQLite allows 32766 parameters a statement)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class TableStore:
    """Generic reads and all-or-nothing merges over the tables of one database."""

    def __init__(self, db: Database):
        self.db = db

    def columns(self, table: str) -> list[str]:
        """The table's columns in order (empty when there is no such table)."""
        with self.db.read() as conn:
            return [r[1] for r in conn.execute(f"PRAGMA table_info({_quote(table)})")]

    def optional_columns(self, table: str) -> set[str]:
        """Columns an insert may leave out: nullable, or with a default."""
        with self.db.read() as conn:
            return {r[1] for r in conn.execute(f"PRAGMA table_info({_quote(table)})") if not r[3] or r[4] is not None}

    def required_columns(self, table: str) -> set[str]:
        """Columns that may not hold NULL (``NOT NULL``, default or not: an explicit NULL is refused either way)."""
        with self.db.read() as conn:
            return {r[1] for r in conn.execute(f"PRAGMA table_info({_quote(table)})") if r[3]}

    def migrations(self) -> list[int]:
        """Numbers of every schema migration applied to this database."""
        with self.db.read() as conn:
            exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'").fetchone()
            return sorted(int(r[0]) for r in conn.execute("SELECT version FROM schema_version")) if exists else []

    def _checked(self, table: str, columns: Iterable[str]) -> list[str]:
        have = self.columns(table)
        if not have:
            raise SchemaMismatch(f"no table {table!r} in {self.db.path}")
        wanted = list(columns)
        unknown = [c for c in wanted if c not in have]
        if unknown:
            raise SchemaMismatch(f"table {table} in {self.db.path} has no column {unknown[0]!r}")
        return wanted

    def select(self, table: str, columns: Sequence[str], where: dict[str, Iterable[object]] | None = None,
               like: dict[str, str] | None = None) -> list[dict]:
        """Rows (as dicts of ``columns``) whose value in each ``where`` column is one of the given values and in
        each ``like`` column matches the pattern (conditions or-ed across ``like``, and-ed with ``where``),
        in insertion order."""
        cols = self._checked(table, [*columns, *(where or {}), *(like or {})])[:len(columns)]
        lists = {c: list(v) for c, v in (where or {}).items()}
        if any(not v for v in lists.values()):
            return []
        big = max(lists, key=lambda c: len(lists[c]), default=None)
        chunks = [lists[big][i:i + CHUNK] for i in range(0, len(lists[big]), CHUNK)] if big else [[]]
        rows: list[tuple] = []
        with self.db.read() as conn:
            for chunk in chunks:
                conds, args = [], []
                for column, vals in lists.items():
                    vals = chunk if column == big else vals
                    conds.append(f"{_quote(column)} IN ({', '.join('?' * len(vals))})")
                    args += vals
                if like:
                    conds.append("(" + " OR ".join(f"{_quote(c)} LIKE ?" for c in like) + ")")
                    args += list(like.values())
                sql = f"SELECT rowid, {', '.join(map(_quote, cols))} FROM {_quote(table)}"
                rows += conn.execute(sql + (" WHERE " + " AND ".join(conds) if conds else ""), args).fetchall()
        rows.sort(key=lambda r: r[0])
        return [dict(zip(cols, r[1:])) for r in rows]

    def merge(self, steps: Sequence[MergeStep]) -> MergeCounts:
        """Insert every step's new rows in one transaction (see the module docstring); returns what was added
        and what was skipped, per table. Raises (and writes nothing) on any error."""
        for step in steps:
            self._checked(step.table, [*step.columns, *step.key, *([step.link[0]] if step.link else [])])
        counts = MergeCounts()
        inserted: dict[str, set[object]] = {}
        with self.db.write() as conn:
            for step in steps:
                added, skipped, keys = self._merge_step(conn, step, inserted)
                inserted.setdefault(step.table, set()).update(keys)
                counts.added[step.table] = counts.added.get(step.table, 0) + added
                counts.skipped[step.table] = counts.skipped.get(step.table, 0) + skipped
        return counts

    @staticmethod
    def _merge_step(conn, step: MergeStep, inserted: dict[str, set[object]]) -> tuple[int, int, set[object]]:
        table, cols = _quote(step.table), step.columns
        exists = (f"SELECT 1 FROM {table} WHERE " + " AND ".join(f"{_quote(k)} IS ?" for k in step.key) + " LIMIT 1")
        insert = f"INSERT INTO {table} ({', '.join(map(_quote, cols))}) VALUES ({', '.join('?' * len(cols))})"
        parents: set[object] | None = None
        if step.link is not None:
            parents = set().union(*(inserted.get(t, set()) for t in step.link[1]))
        added, skipped, keys = 0, 0, set()
        for row in step.rows:
            if parents is not None and row[step.link[0]] not in parents:  # type: ignore[index]  # link is set here
                skipped += 1
                continue
            if conn.execute(exists, [row[k] for k in step.key]).fetchone() is not None:
                skipped += 1
                continue
            conn.execute(insert, [row[c] for c in cols])
            keys.add(row[step.key[0]])
            added += 1
        return added, skipped, keys

    def imports(self) -> list[dict]:
        """Bundles imported into this home, newest first (table ``bundle_imports``)."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT bundle_sha256, imported_at, dataset, manifest, added FROM bundle_imports "
                                "ORDER BY imported_at DESC").fetchall()
        return [dict(zip(("bundle_sha256", "imported_at", "dataset", "manifest", "added"), r)) for r in rows]
