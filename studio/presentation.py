"""A bundle opened for presenting: its records in a home of their own, opened read-only.

The bundle is imported once (checked like ``pal workspace import``) into
``<home>/presentations/<its SHA-256>/`` — a staging folder renamed into place only when the import
succeeded, so a refused or interrupted bundle leaves nothing behind — and that home is opened as a
read-only :class:`~studio.workspace.Workspace`: no LLM client, no migration, no write (no response cache,
vectors in memory). The home's own records, accounts and settings are untouched; presenting another bundle,
or the same one again, reuses what was imported. :func:`clean_presentations` removes presentations and uploaded
bundles unused for a week and what interrupted imports left.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Collection, Mapping
from pathlib import Path

from backends.llm.local_server import LocalServers
from backends.paths import CACHE_DB, StatePaths
from palset.dataset import Dataset
from studio.bundle.export import made_with
from studio.bundle.importer import BundleError, import_bundle
from studio.bundle.kinds import BUILDS, BY_TABLE
from studio.bundle.manifest import MadeWith, Manifest
from studio.bundle.reader import file_sha256
from studio.workspace import Workspace

log = logging.getLogger(__name__)
UNUSED_S = 7 * 86400.0  # a presentation or an uploaded bundle unused this long is removed
PARTIAL_S = 3600.0  # a staging folder this old is what an interrupted import left
bundle_sha256 = file_sha256


def presentation_home(base_home: Path, sha: str) -> Path:
    return StatePaths(Path(base_home)).presentations / sha[:20]


def _ready(home: Path) -> bool:
    paths = StatePaths(home)
    return paths.runs_db.is_file() and paths.imported.is_file()


def open_presentation(base: Workspace, bundle: Path, *, known: Mapping[str, Path], dataset: Dataset | None = None,
                      servers: LocalServers | None = None) -> Workspace:
    """The read-only workspace presenting ``bundle`` (imported on first use; :class:`BundleError` if refused)."""
    bundle = Path(bundle)
    if not bundle.is_file():
        raise BundleError(bundle, "no such bundle file")
    sha = bundle_sha256(bundle)
    home = presentation_home(base.home, sha)
    if not _ready(home):
        staging = home.with_name(home.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        ws = Workspace(staging, base.config, servers=servers or base.servers, takes_log=False)
        try:
            try:
                report = import_bundle(ws, bundle, known=known, dataset=dataset)
            finally:  # both of the staging home's databases, refused or not (the folder is removed or renamed)
                ws.db.close()
                if ws.cache is not None:
                    ws.cache.db.close()
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        for leftover in staging.glob(f"{CACHE_DB}*"):  # the staging home's empty response cache: never used read-only
            leftover.unlink(missing_ok=True)
        StatePaths(staging).imported.write_text(report.model_dump_json(indent=1), encoding="utf-8")
        shutil.rmtree(home, ignore_errors=True)
        staging.rename(home)
        log.info("presentation of %s ready in %s (%d rows)", bundle, home, report.total_added)
    mark_used(StatePaths(home).imported)
    ws = Workspace(home, base.config, servers=servers or base.servers, read_only=True)
    imports = ws.tables.imports()
    ws.presented = Manifest.model_validate_json(imports[0]["manifest"]) if imports else None
    ws.made_with = records_made_with(ws)
    return ws


def records_made_with(ws: Workspace) -> list[MadeWith]:
    """Which endpoints and models made the records, derived from the records themselves (their LLM calls, the judge
    and model each judgment and result names) exactly as an export derives its manifest's ``made_with``: a bundle's
    claims are checked against this, never shown as fact."""
    wanted = (BUILDS, "sim_runs", "judgments", "bench_results", "llm_calls")
    rows = {t: ws.tables.select(t, [c for c in ws.tables.columns(t) if c not in BY_TABLE[t].skip]) for t in wanted}
    return made_with(rows, ws.tables)


def import_once(ws: Workspace, bundle: Path, *, known: Mapping[str, Path]) -> bool:
    """Import ``bundle`` into ``ws`` unless this very file was imported there before (``make run`` does this with
    the bundled demo workspace on first start); True when it was imported now. A refused bundle is logged."""
    bundle = Path(bundle)
    if ws.read_only or not bundle.is_file():
        return False
    sha = bundle_sha256(bundle)
    if any(r["bundle_sha256"] == sha for r in ws.tables.imports()):
        return False
    try:
        report = import_bundle(ws, bundle, known=known)
    except BundleError:
        log.exception("the bundle %s was not imported into %s", bundle, ws.home)
        return False
    log.info("imported %s into %s on first start: %d rows", bundle, ws.home, report.total_added)
    ws.audit.record("system", "bundle.import", bundle.name, sha256=report.bundle, dataset=report.dataset,
                    added=report.total_added, via="PAL_DEMO_WORKSPACE")
    return True


def mark_used(path: Path) -> None:
    """Mark a presentation as used now (what :func:`clean_presentations` goes by)."""
    try:
        os.utime(path)
    except OSError:
        log.warning("cannot mark %s as used", path, exc_info=True)


def clean_presentations(base_home: Path, keep: Collection[str] = (), *, unused_s: float = UNUSED_S,
                        now: float | None = None) -> list[Path]:
    """Remove presentations and uploaded bundles unused for ``unused_s`` and staging folders of interrupted imports;
    ``keep``: SHA-256s of bundles to keep whatever their age (``PAL_PRESENT``'s). Returns what was removed."""
    paths = StatePaths(Path(base_home))
    now = time.time() if now is None else now
    kept = {k[:20] for k in keep}
    removed: list[Path] = []
    if not paths.presentations.is_dir():
        return removed
    for entry in paths.presentations.iterdir():
        if entry == paths.uploads:
            continue
        try:
            if entry.name.endswith(".partial"):
                stale = now - entry.stat().st_mtime > PARTIAL_S
            else:
                marker = StatePaths(entry).imported
                stale = entry.name not in kept and now - (marker.stat().st_mtime if marker.is_file()
                                                          else entry.stat().st_mtime) > unused_s
        except OSError:
            log.warning("cannot check %s", entry, exc_info=True)
            continue
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    if paths.uploads.is_dir():
        for upload in paths.uploads.iterdir():
            try:
                stale = upload.stem[:20] not in kept and now - upload.stat().st_mtime > unused_s
            except OSError:
                continue
            if stale:
                upload.unlink(missing_ok=True)
                removed.append(upload)
    if removed:
        log.info("removed %d unused presentation(s) and upload(s) under %s", len(removed), paths.presentations)
    return removed
