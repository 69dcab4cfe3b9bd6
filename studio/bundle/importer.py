"""``pal workspace import``: merge a bundle into a home — checked first, then all of it or nothing.

Checks, in order, each refusing with a message that names what is wrong: the file is a zip with a manifest
of a known format version; every member is listed, of the listed size and SHA-256; every table is a known
record kind whose columns and schema migrations this install has; the bundle's dataset is present here
(by its name, or the folder given), with the same users (fingerprints of their counts). Then the rows are
re-keyed for this home — the dataset placeholder becomes this machine's dataset key and every id derived
from it (builds, runs, judgments, results, fidelity reports, an experiment's job id and its units' ids) is
derived again, so the records are exactly what this home would have made — and merged in one transaction: a
record whose key is already here is kept as it is (importing twice adds nothing). Chroma vectors are not
carried: a build embeds its items on first retrieval. An imported experiment starts no work (its units in
progress arrive queued, in the ``cli`` pool: :mod:`studio.bundle.kinds`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

from backends.store.tables import MergeCounts, MergeStep, TableStore
from palset.dataset import Dataset, dataset_key
from palset.loader import load_dataset
from studio.bundle.kinds import BY_TABLE, KINDS, Child, Row
from studio.bundle.manifest import (
    FORMAT,
    MANIFEST,
    PROMPTS,
    SUPPORTED_VERSIONS,
    Manifest,
    table_member,
    user_fingerprint,
)
from studio.bundle.reader import (
    MAX_MANIFEST_BYTES,
    BundleError,
    file_sha256,
    max_bundle_bytes,
    member_lines,
    open_archive,
    parse_json,
    read_capped,
)
from studio.bundle.rewrite import DATASET_TOKEN, Rewriter
from studio.bundle.validate import validate_rows

if TYPE_CHECKING:
    from studio.workspace import Workspace

log = logging.getLogger(__name__)
__all__ = ["BundleError", "ImportReport", "LoadedBundle", "import_bundle", "read_bundle"]


@dataclass
class LoadedBundle:
    path: Path
    sha256: str
    manifest: Manifest
    rows: dict[str, list[Row]]
    prompts: list[dict] = field(default_factory=list)


class ImportReport(BaseModel):
    bundle: str  # the file's SHA-256
    dataset: str  # its name
    dataset_key: str  # where it lives in this home
    added: dict[str, int]
    skipped: dict[str, int]
    already_imported: bool

    @property
    def total_added(self) -> int:
        return sum(self.added.values())


UNFORESEEN = (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError, OverflowError, UnicodeError,
              sqlite3.Error, zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError, OSError)


def _refusal(path: Path, e: BaseException) -> BundleError:
    log.exception("bundle %s refused on an error no check foresaw", path)
    return BundleError(path, f"its records cannot be imported here ({type(e).__name__}: {str(e)[:200]}); nothing was "
                             "imported")


def read_bundle(path: Path) -> LoadedBundle:
    """Open and check a bundle file (format, members, sizes, checksums, row counts); raises :class:`BundleError`,
    whatever is wrong with the file. Reads as :mod:`studio.bundle.reader` says (actual bytes counted, nothing
    decompressed past what is declared and allowed)."""
    try:
        return _read_bundle(Path(path))
    except BundleError:
        raise
    except UNFORESEEN as e:
        raise _refusal(Path(path), e) from None


def _read_bundle(path: Path) -> LoadedBundle:
    limit = max_bundle_bytes()
    with open_archive(path, limit) as archive:
        names = set(archive.namelist())
        if MANIFEST not in names:
            raise BundleError(path, f"not a PAL Studio bundle (no {MANIFEST})")
        if archive.getinfo(MANIFEST).file_size > MAX_MANIFEST_BYTES:
            raise BundleError(path, f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES >> 20} MiB")
        manifest = _manifest(path, read_capped(path, archive, MANIFEST, MAX_MANIFEST_BYTES))
        listed = set(manifest.members) | {MANIFEST}
        if names != listed:
            extra, lost = sorted(names - listed), sorted(listed - names)
            raise BundleError(path, f"members differ from the manifest (unlisted: {extra or 'none'}; missing: "
                                    f"{lost or 'none'}); the file was changed after it was made")
        declared = sum(m.bytes for m in manifest.members.values())
        if declared > limit:
            raise BundleError(path, f"its members hold {declared >> 20} MiB, more than this server accepts "
                                    f"({limit >> 20} MiB, PAL_MAX_BUNDLE_MB)")
        for name, info in manifest.members.items():
            if archive.getinfo(name).file_size != info.bytes:
                raise BundleError(path, f"{name}: the zip entry says {archive.getinfo(name).file_size} bytes, the "
                                        f"manifest {info.bytes}; the file was changed after it was made")
        budget = [limit]
        rows = {}
        for table, table_info in manifest.tables.items():
            member = table_member(table)
            if member not in manifest.members:
                raise BundleError(path, f"the manifest lists table {table} but the bundle has no {member}")
            rows[table] = _rows(path, archive, member, manifest, budget, table_info.columns)
            if len(rows[table]) != table_info.rows:
                raise BundleError(path, f"{member} holds {len(rows[table])} rows, the manifest says {table_info.rows}")
        extra_members = sorted(set(manifest.members) - {table_member(t) for t in manifest.tables} - {PROMPTS})
        if extra_members:
            raise BundleError(path, f"members that hold no table: {', '.join(extra_members)}")
        prompts = _rows(path, archive, PROMPTS, manifest, budget, None) if PROMPTS in manifest.members else []
    return LoadedBundle(path, file_sha256(path), manifest, rows, prompts)


def _manifest(path: Path, raw: bytes) -> Manifest:
    data = parse_json(path, MANIFEST, raw)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleError(path, f"not a PAL Studio bundle ({MANIFEST} has no format {FORMAT!r})")
    if data.get("format_version") not in SUPPORTED_VERSIONS:
        raise BundleError(path, f"bundle format version {repr(data.get('format_version'))[:20]} is unknown to this "
                                f"PAL Studio (it reads {', '.join(map(str, SUPPORTED_VERSIONS))}; made by PAL Studio "
                                f"{str(data.get('pal_studio_version', '?'))[:40]}): update PAL Studio to import it")
    try:
        return Manifest.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        raise BundleError(path, f"{MANIFEST}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _rows(path: Path, archive: zipfile.ZipFile, member: str, manifest: Manifest, budget: list[int],
          columns: list[str] | None) -> list[Row]:
    info = manifest.members[member]
    out = []
    for no, line in enumerate(member_lines(path, archive, member, info.bytes, info.sha256, budget), start=1):
        if not line.strip():
            continue
        row = parse_json(path, f"{member} line {no}", line)
        if not isinstance(row, dict) or (columns is not None and list(row) != columns):
            raise BundleError(path, f"{member} line {no}: the row's columns differ from the manifest's")
        out.append(row)
    return out


def check_schema(bundle: LoadedBundle, tables: TableStore) -> None:
    """Every table a known record kind, made under migrations this install has, with the same columns — or fewer: a
    bundle made before a migration added optional columns imports with those columns at their defaults — and no
    row leaving empty a column the table requires (refused by name, not by the database's error at merge time)."""
    have = set(tables.migrations())
    for table, info in bundle.manifest.tables.items():
        kind = BY_TABLE.get(table)
        if kind is None:
            raise BundleError(bundle.path, f"records of kind {table!r} are unknown to this PAL Studio (made by "
                              f"{bundle.manifest.pal_studio_version}): update PAL Studio to import this bundle")
        unknown = sorted(set(info.migrations) - have)
        if unknown:
            raise BundleError(bundle.path, f"table {table} needs schema version(s) {unknown}, which this PAL Studio "
                              f"does not have (it has up to {max(have, default=0)}): update PAL Studio to import it")
        ours = [c for c in tables.columns(table) if c not in kind.skip]
        later = [c for c in ours if c not in info.columns]  # added since the bundle was made: left to their defaults
        if info.columns != ours and not ([c for c in ours if c in info.columns] == info.columns
                                         and set(later) <= tables.optional_columns(table)):
            raise BundleError(bundle.path, f"table {table}: the bundle's columns {info.columns} differ from this "
                              f"install's {ours}")
        required = tables.required_columns(table)
        for no, row in enumerate(bundle.rows.get(table, []), start=1):
            if empty := sorted(c for c in required if c in row and row[c] is None):
                raise BundleError(bundle.path, f"{table_member(table)} line {no}: {', '.join(empty)} is empty, which "
                                  f"table {table} does not allow; nothing was imported")


def resolve_dataset(bundle: LoadedBundle, known: Mapping[str, Path], dataset: Dataset | None = None) -> Dataset:
    """The bundle's dataset in this install: the one given, else the one known by the bundle's dataset name;
    its users must match the bundle's (same fingerprints)."""
    info = bundle.manifest.dataset
    if dataset is None:
        root = known.get(info.name)
        if root is None or not Path(root).is_dir():
            names = ", ".join(sorted(known)) or "none"
            raise BundleError(bundle.path, f"made for dataset {info.name!r} ({len(info.users)} users), which is not "
                              f"present here (known datasets: {names}). Name its folder with --dataset PATH, or "
                              f"PAL_DATASETS='{info.name}=/path/to/it'; nothing was imported")
        dataset = load_dataset(root, lazy=True)
    missing = [u for u in info.users if u not in dataset.users]
    differ = [u for u, fp in info.users.items() if u in dataset.users and user_fingerprint(dataset.users[u]) != fp]
    if missing or differ:
        raise BundleError(bundle.path, f"dataset {info.name!r} here is not the one the records were made on: "
                          + "; ".join(
                              ([f"missing user(s) {', '.join(missing[:10])}"] if missing else [])
                              + ([f"user(s) {', '.join(differ[:10])} have other sessions, logs or turns"] if differ
                                 else [])) + "; nothing was imported")
    return dataset


def plan_import(bundle: LoadedBundle, target_key: str) -> list[MergeStep]:
    """The merge steps with every row re-keyed for a home where the dataset's key is ``target_key``."""
    mapping: dict[str, str] = {DATASET_TOKEN: target_key}
    rewriter = Rewriter(mapping)
    steps = []
    for kind in KINDS:
        info = bundle.manifest.tables.get(kind.table)
        if info is None:
            continue
        rows = []
        for row in bundle.rows[kind.table]:
            row = rewriter.row(row, kind)
            if kind.rekey is not None:
                old, new = str(row[kind.key[0]]), kind.rekey(row)
                if new != old:
                    mapping[old] = new
                    row = rewriter.row(row, kind)
            rows.append(row)
        link = (kind.scope.column, kind.scope.parents) if isinstance(kind.scope, Child) else None
        steps.append(MergeStep(kind.table, tuple(info.columns), kind.key, rows, link))
    return steps


def import_bundle(ws: Workspace, path: Path, *, known: Mapping[str, Path], dataset: Dataset | None = None
                  ) -> ImportReport:
    """Check ``path`` and merge it into ``ws`` (see the module docstring); raises :class:`BundleError` — for any
    problem of the file, including one no check foresaw (logged with its traceback; nothing is half-imported)."""
    try:
        return _import(ws, Path(path), known, dataset)
    except BundleError:
        raise
    except UNFORESEEN as e:
        raise _refusal(Path(path), e) from None


def _import(ws: Workspace, path: Path, known: Mapping[str, Path], dataset: Dataset | None) -> ImportReport:
    bundle = read_bundle(path)
    check_schema(bundle, ws.tables)
    validate_rows(bundle.path, bundle.manifest, bundle.rows)
    target = resolve_dataset(bundle, known, dataset)
    key = dataset_key(target.root)
    steps = plan_import(bundle, key)
    before = {r["bundle_sha256"] for r in ws.tables.imports()}
    record = {"bundle_sha256": bundle.sha256, "imported_at": time.time(), "dataset": key,
              "manifest": bundle.manifest.model_dump_json(), "added": json.dumps(bundle.manifest.counts)}
    steps.append(MergeStep("bundle_imports", tuple(record), ("bundle_sha256",), [record]))
    counts: MergeCounts = ws.tables.merge(steps)
    counts.added.pop("bundle_imports", None)
    counts.skipped.pop("bundle_imports", None)
    report = ImportReport(bundle=bundle.sha256, dataset=bundle.manifest.dataset.name, dataset_key=key,
                          added=counts.added, skipped=counts.skipped, already_imported=bundle.sha256 in before)
    log.info("imported %s into %s: %d record rows added, %d skipped", path, ws.home, report.total_added,
             sum(report.skipped.values()))
    return report
