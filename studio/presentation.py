"""A bundle opened for presenting: its records in a home of their own, opened read-only.

The bundle is imported once (checked like ``pal workspace import``) into
``<home>/presentations/<its SHA-256>/`` — a staging folder renamed into place only when the import
succeeded, so a refused or interrupted bundle leaves nothing behind — and that home is opened as a
read-only :class:`~studio.workspace.Workspace`: no LLM client, no migration, no write. The home's own
records, accounts and settings are untouched; presenting another bundle, or the same one again, reuses
what was imported.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path

from backends.llm.local_server import LocalServers
from backends.paths import StatePaths
from palset.dataset import Dataset
from studio.bundle.importer import BundleError, import_bundle
from studio.bundle.manifest import Manifest
from studio.workspace import Workspace

log = logging.getLogger(__name__)


def bundle_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
        raise BundleError(f"{bundle}: no such bundle file")
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
                ws.cache.db.close()
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        StatePaths(staging).imported.write_text(report.model_dump_json(indent=1), encoding="utf-8")
        shutil.rmtree(home, ignore_errors=True)
        staging.rename(home)
        log.info("presentation of %s ready in %s (%d rows)", bundle, home, report.total_added)
    ws = Workspace(home, base.config, servers=servers or base.servers, read_only=True)
    imports = ws.tables.imports()
    ws.presented = Manifest.model_validate_json(imports[0]["manifest"]) if imports else None
    return ws


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
    return True
