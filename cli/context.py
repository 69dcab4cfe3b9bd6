"""The workspace of a ``pal`` command (``PAL_HOME`` and the configuration, opened once per home) and the dataset
folder it names."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from backends.paths import default_home

if TYPE_CHECKING:
    from palset.dataset import Dataset
    from studio.workspace import Workspace


def open_workspace() -> Workspace:
    """The command's workspace; a broken configuration raises :class:`ConfigError` (``pal`` prints it, exit 2)."""
    return _open(str(default_home()))


@cache
def _open(home: str) -> Workspace:
    from studio.workspace import Workspace

    return Workspace(Path(home))


def load_dataset_arg(path: str | Path, shown: str | None = None) -> Dataset:
    """The PAL-Set folder at ``path`` (loaded lazily); one without users ends the command, naming ``shown`` (default:
    ``path``) and its first problems."""
    from palset.loader import load_dataset

    dataset = load_dataset(path, lazy=True)
    if not dataset.users:
        raise SystemExit(f"error: {shown or path}: no users ({'; '.join(str(p) for p in dataset.problems[:3])})")
    return dataset


def cli_actor() -> str:
    """Who a command acts as in the audit log and in what it creates: ``cli:<OS user>``."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name in this environment (a container without an /etc/passwd entry)
        return "cli"
