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

import io
import json
import logging
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
    sha256,
    table_member,
    user_fingerprint,
)
from studio.bundle.rewrite import DATASET_TOKEN, Rewriter

if TYPE_CHECKING:
    from studio.workspace import Workspace

log = logging.getLogger(__name__)
MAX_BUNDLE_BYTES = 4 * 1024**3  # uncompressed; a bundle of PAL-Set's 100 users × 3 methods is well under


class BundleError(ValueError):
    """A bundle that is refused; the message says why and what to do. Nothing was imported."""


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


def read_bundle(path: Path) -> LoadedBundle:
    """Open and check a bundle file (format, members, checksums, row counts); raises :class:`BundleError`."""
    path = Path(path)
    try:
        data = path.read_bytes()
        archive = zipfile.ZipFile(io.BytesIO(data))
    except FileNotFoundError:
        raise BundleError(f"{path}: no such file") from None
    except (zipfile.BadZipFile, OSError) as e:
        raise BundleError(f"{path}: not a PAL Studio bundle (not a zip file: {e})") from None
    with archive:
        names = set(archive.namelist())
        if MANIFEST not in names:
            raise BundleError(f"{path}: not a PAL Studio bundle (no {MANIFEST})")
        manifest = _manifest(path, archive.read(MANIFEST))
        listed = set(manifest.members) | {MANIFEST}
        if names != listed:
            extra, lost = sorted(names - listed), sorted(listed - names)
            raise BundleError(f"{path}: members differ from the manifest (unlisted: {extra or 'none'}; missing: "
                              f"{lost or 'none'}); the file was changed after it was made")
        if sum(i.file_size for i in archive.infolist()) > MAX_BUNDLE_BYTES:
            raise BundleError(f"{path}: more than {MAX_BUNDLE_BYTES >> 30} GiB uncompressed; refused")
        blobs = {}
        for member, info in manifest.members.items():
            blob = archive.read(member)
            if len(blob) != info.bytes or sha256(blob) != info.sha256:
                raise BundleError(f"{path}: {member}: checksum mismatch (the file was changed or damaged after it "
                                  "was made); nothing was imported")
            blobs[member] = blob
    rows = {}
    for table, table_info in manifest.tables.items():
        member = table_member(table)
        if member not in blobs:
            raise BundleError(f"{path}: the manifest lists table {table} but the bundle has no {member}")
        rows[table] = _rows(path, member, blobs[member], table_info.columns)
        if len(rows[table]) != table_info.rows:
            raise BundleError(f"{path}: {member} holds {len(rows[table])} rows, the manifest says {table_info.rows}")
    prompts = _rows(path, PROMPTS, blobs[PROMPTS], None) if PROMPTS in blobs else []
    return LoadedBundle(path, sha256(data), manifest, rows, prompts)


def _manifest(path: Path, raw: bytes) -> Manifest:
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise BundleError(f"{path}: {MANIFEST} is not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleError(f"{path}: not a PAL Studio bundle ({MANIFEST} has no format {FORMAT!r})")
    if data.get("format_version") not in SUPPORTED_VERSIONS:
        raise BundleError(f"{path}: bundle format version {data.get('format_version')!r} is unknown to this PAL Studio "
                          f"(it reads {', '.join(map(str, SUPPORTED_VERSIONS))}; made by PAL Studio "
                          f"{data.get('pal_studio_version', '?')}): update PAL Studio to import it")
    try:
        return Manifest.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        raise BundleError(f"{path}: {MANIFEST}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _rows(path: Path, member: str, blob: bytes, columns: list[str] | None) -> list[Row]:
    out = []
    for no, line in enumerate(blob.decode("utf-8").splitlines(), start=1):
        try:
            row = json.loads(line)
        except ValueError as e:
            raise BundleError(f"{path}: {member} line {no}: not JSON ({e})") from None
        if not isinstance(row, dict) or (columns is not None and list(row) != columns):
            raise BundleError(f"{path}: {member} line {no}: the row's columns differ from the manifest's")
        out.append(row)
    return out


def check_schema(bundle: LoadedBundle, tables: TableStore) -> None:
    """Every table a known record kind, made under migrations this install has, with the same columns — or fewer: a
    bundle made before a migration added optional columns imports with those columns at their defaults."""
    have = set(tables.migrations())
    for table, info in bundle.manifest.tables.items():
        kind = BY_TABLE.get(table)
        if kind is None:
            raise BundleError(f"{bundle.path}: records of kind {table!r} are unknown to this PAL Studio (made by "
                              f"{bundle.manifest.pal_studio_version}): update PAL Studio to import this bundle")
        unknown = sorted(set(info.migrations) - have)
        if unknown:
            raise BundleError(f"{bundle.path}: table {table} needs schema version(s) {unknown}, which this PAL Studio "
                              f"does not have (it has up to {max(have, default=0)}): update PAL Studio to import it")
        ours = [c for c in tables.columns(table) if c not in kind.skip]
        later = [c for c in ours if c not in info.columns]  # added since the bundle was made: left to their defaults
        if info.columns != ours and not ([c for c in ours if c in info.columns] == info.columns
                                         and set(later) <= tables.optional_columns(table)):
            raise BundleError(f"{bundle.path}: table {table}: the bundle's columns {info.columns} differ from this "
                              f"install's {ours}")


def resolve_dataset(bundle: LoadedBundle, known: Mapping[str, Path], dataset: Dataset | None = None) -> Dataset:
    """The bundle's dataset in this install: the one given, else the one known by the bundle's dataset name;
    its users must match the bundle's (same fingerprints)."""
    info = bundle.manifest.dataset
    if dataset is None:
        root = known.get(info.name)
        if root is None or not Path(root).is_dir():
            names = ", ".join(sorted(known)) or "none"
            raise BundleError(f"{bundle.path}: made for dataset {info.name!r} ({len(info.users)} users), which is not "
                              f"present here (known datasets: {names}). Name its folder with --dataset PATH, or "
                              f"PAL_DATASETS='{info.name}=/path/to/it'; nothing was imported")
        dataset = load_dataset(root, lazy=True)
    missing = [u for u in info.users if u not in dataset.users]
    differ = [u for u, fp in info.users.items() if u in dataset.users and user_fingerprint(dataset.users[u]) != fp]
    if missing or differ:
        raise BundleError(f"{bundle.path}: dataset {info.name!r} here ({dataset.root}) is not the one the records were "
                          f"made on: " + "; ".join(
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
    """Check ``path`` and merge it into ``ws`` (see the module docstring); raises :class:`BundleError`."""
    bundle = read_bundle(path)
    check_schema(bundle, ws.tables)
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
