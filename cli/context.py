"""The workspace of a ``pal`` command: ``PAL_HOME`` and the configuration, opened once per home."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from backends.paths import default_home

if TYPE_CHECKING:
    from studio.workspace import Workspace


def open_workspace() -> Workspace:
    """The command's workspace; a broken configuration raises :class:`ConfigError` (``pal`` prints it, exit 2)."""
    return _open(str(default_home()))


@cache
def _open(home: str) -> Workspace:
    from pathlib import Path

    from studio.workspace import Workspace

    return Workspace(Path(home))
