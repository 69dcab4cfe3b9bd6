"""Where PAL Studio keeps its state: one folder, ``PAL_HOME`` (default ``.pal/`` in the project).

Run store, response cache, Chroma collections and local-server files all live under it, so two
installs (or two test runs with different ``PAL_HOME``) never share state.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def pal_home() -> Path:
    home = Path(os.environ.get("PAL_HOME") or PROJECT_ROOT / ".pal").expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def state_path(*parts: str) -> Path:
    """A path under ``PAL_HOME``; its parent folder exists."""
    path = pal_home().joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
