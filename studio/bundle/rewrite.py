"""Rewriting rows on their way into or out of a bundle: whole values only, in plain columns and inside JSON.

A dataset key, a build id or a run id is replaced where it is a whole value — a column's value, a
string literal (value or object key) inside a JSON column, or one ``/``-separated part of an id path (a job
unit's id: ``<job id>/sim/<run id>``) — never inside a longer text, so an id that happens to appear in a
dialogue stays as it was. JSON text is edited in place (string literal by
string literal), so a row that holds nothing to replace keeps its exact bytes.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable

from studio.bundle.kinds import RecordKind, Row

_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
DATASET_TOKEN = "@pal-bundle:dataset@"  # stands for the exported dataset's key (a path on the exporting machine)


class Rewriter:
    """Replaces whole values found in ``mapping`` (which may grow between rows)."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping
        self._escaped: dict[str, str] = {}
        self._seen = 0

    def _escaped_map(self) -> dict[str, str]:
        """JSON spellings (ASCII-escaped or not) of every key, kept up to date as the mapping grows."""
        if self._seen != len(self.mapping):
            for old, new in itertools.islice(self.mapping.items(), self._seen, None):
                for ascii_only in (True, False):
                    self._escaped[json.dumps(old, ensure_ascii=ascii_only)[1:-1]] = json.dumps(new, ensure_ascii=False)
            self._seen = len(self.mapping)
        return self._escaped

    def json_text(self, text: str) -> str:
        escaped = self._escaped_map()
        if not escaped or (len(escaped) <= 16 and not any(k in text for k in escaped)):
            return text  # the common case on export (one key to hide): no literal to visit
        return _STRING.sub(lambda m: escaped.get(m.group(1), m.group(0)), text)

    def row(self, row: Row, kind: RecordKind) -> Row:
        out = dict(row)
        for column, value in row.items():
            if not isinstance(value, str):
                continue
            if column in kind.json:
                out[column] = self.json_text(value)
            elif column in kind.paths and value not in self.mapping:
                out[column] = "/".join(self.mapping.get(part, part) for part in value.split("/"))
            elif value in self.mapping:
                out[column] = self.mapping[value]
        return out


def people_names(rows: dict[str, list[Row]], kinds: Iterable[RecordKind]) -> tuple[set[str], set[str]]:
    """(annotators, other people) named in the rows: assignment and answer columns called ``annotator`` and
    JSON name lists count as annotators; creators and editors as people."""
    annotators: set[str] = set()
    others: set[str] = set()
    for kind in kinds:
        for row in rows.get(kind.table, []):
            for column in kind.people:
                if isinstance(row.get(column), str):
                    (annotators if column == "annotator" else others).add(str(row[column]))
            for column in kind.people_lists:
                annotators.update(str(n) for n in json.loads(str(row[column]) or "[]"))
    return annotators, others - annotators


def pseudonym_map(annotators: set[str], others: set[str]) -> dict[str, str]:
    """``annotator-1``, ``annotator-2`` … and ``person-1`` … in sorted order of the names (stable per bundle)."""
    out = {name: f"annotator-{i}" for i, name in enumerate(sorted(annotators), start=1)}
    out.update({name: f"person-{i}" for i, name in enumerate(sorted(others), start=1)})
    return out


def pseudonymise(row: Row, kind: RecordKind, names: dict[str, str]) -> Row:
    out = dict(row)
    for column in kind.people:
        if isinstance(row.get(column), str):
            out[column] = names.get(str(row[column]), row[column])
    for column in kind.people_lists:
        out[column] = json.dumps([names.get(n, n) for n in json.loads(str(row[column]) or "[]")])
    return out
