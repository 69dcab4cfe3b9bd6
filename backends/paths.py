"""Where PAL Studio keeps its state: one folder, ``PAL_HOME`` (default ``.pal/`` in the project).

Run store, response cache, Chroma collections, generation runs, PLUM adapters, local-server and
application logs all live under it, so two installs (or two test runs with different ``PAL_HOME``)
never share state. :class:`StatePaths` names every place; only the composition root
(:mod:`studio.workspace`) turns them into stores.

The home is private: it holds bcrypt hashes, answers, the audit log and the session key. :func:`make_private`
(the workspace calls it on start) creates it 0700 and tightens an existing one — folders 0700, files 0600 — with a
log line naming what it changed; links are left alone (never followed).
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def default_home() -> Path:
    """``PAL_HOME``, or ``.pal/`` in the project (not created here)."""
    return Path(os.environ.get("PAL_HOME") or PROJECT_ROOT / ".pal").expanduser()


def _tighten(path: Path, mode: int) -> bool:
    try:
        current = stat.S_IMODE(path.lstat().st_mode)
        if current & ~mode == 0:
            return False
        path.chmod(current & mode)  # never a link: the caller skips them
    except FileNotFoundError:  # gone since the walk listed it: a SQLite -wal or -journal another process closed
        log.debug("PAL_HOME entry %s vanished before it could be tightened", path)
        return False
    return True


def make_private(home: Path) -> int:
    """Create ``home`` (0700) and take group and other access from it, every folder (0700) and file (0600) under it;
    returns how many were changed (logged at INFO when any)."""
    home = Path(home)
    home.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    changed = int(_tighten(home, PRIVATE_DIR))
    for root, dirs, files in os.walk(home):
        for name in dirs:
            path = Path(root) / name
            changed += not path.is_symlink() and _tighten(path, PRIVATE_DIR)
        for name in files:
            path = Path(root) / name
            changed += not path.is_symlink() and _tighten(path, PRIVATE_FILE)
    if changed:
        log.info("PAL_HOME %s made private: %d files and folders lost group and other access (folders 0700, files "
                 "0600)", home, changed)
    return changed


RUNS_DB = "runs.sqlite"
CACHE_DB = "cache.sqlite"
EMBED_CACHE_DB = "embeddings.sqlite"  # vectors of texts embedded before (backends.store.embed_cache)
METHOD_FILES = "memory_files"  # PLUM adapters and other files a memory method keeps
SYNTH = "synth"  # generation runs
PRESENTATIONS = "presentations"  # bundles presented read-only, each imported into a home of its own
IMPORTED = "imported"  # in a presentation's home: the import report, written last (the home is complete)
UPLOADS = "uploads"  # under presentations/: bundles uploaded from the sidebar
SESSION_KEY = "session.key"  # the key that signs sign-in session cookies (created 0600 on first use)


@dataclass(frozen=True)
class StatePaths:
    """Every file and folder under one home (each name spelt once, above)."""

    home: Path

    @property
    def runs_db(self) -> Path:
        return self.home / RUNS_DB

    @property
    def cache_db(self) -> Path:
        return self.home / CACHE_DB

    @property
    def embed_cache(self) -> Path:
        return self.home / EMBED_CACHE_DB

    @property
    def chroma(self) -> Path:
        return self.home / "chroma" / "db"

    @property
    def synth(self) -> Path:
        return self.home / SYNTH

    @property
    def method_files(self) -> Path:
        return self.home / METHOD_FILES

    @property
    def local_server(self) -> Path:
        return self.home / "local_server"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def presentations(self) -> Path:
        return self.home / PRESENTATIONS

    @property
    def uploads(self) -> Path:
        return self.presentations / UPLOADS

    @property
    def imported(self) -> Path:
        return self.home / IMPORTED

    @property
    def session_key(self) -> Path:
        return self.home / SESSION_KEY
