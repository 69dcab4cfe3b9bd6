"""Where PAL Studio keeps its state: one folder, ``PAL_HOME`` (default ``.pal/`` in the project).

Run store, response cache, Chroma collections, generation runs, PLUM adapters, local-server and
application logs all live under it, so two installs (or two test runs with different ``PAL_HOME``)
never share state. :class:`StatePaths` names every place; only the composition root
(:mod:`studio.workspace`) turns them into stores.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def default_home() -> Path:
    """``PAL_HOME``, or ``.pal/`` in the project (not created here)."""
    return Path(os.environ.get("PAL_HOME") or PROJECT_ROOT / ".pal").expanduser()


RUNS_DB = "runs.sqlite"
CACHE_DB = "cache.sqlite"
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
