"""Which datasets the app can open, and cached loading.

A dataset is opened by *name* (``?dataset=demo``), never by a path taken from the URL: names come
from the bundled demo, the ``PAL_DATASETS`` variable (``name=path;name=path``; see :mod:`palset.names`)
and folders a person added in the sidebar during this browser session.
"""

from __future__ import annotations

from pathlib import Path

from palset.dataset import Dataset
from palset.files import locate
from palset.loader import load_dataset
from palset.names import DEFAULT_DATASET, DEMO_PATH, PROJECT_ROOT, configured_datasets, is_bundled_demo

__all__ = ["DEFAULT_DATASET", "DEMO_PATH", "PROJECT_ROOT", "configured_datasets", "folder_signature",
           "is_bundled_demo", "load", "name_for_path"]


def folder_signature(root: Path) -> tuple[tuple[str, int, int], ...]:
    """Size and mtime of the release files the loader reads, so an edited dataset reloads.

    Bounded: at most the ten files of the PAL-Set layout are looked at (never a walk of the folder),
    so a folder holding anything else costs nothing on each rerun.
    """
    if not root.is_dir():
        return ()
    out = []
    for name, path in sorted(locate(root).items()):
        if path is not None:
            st = path.stat()
            out.append((name, st.st_size, st.st_mtime_ns))
    return tuple(out)


def name_for_path(path: Path, taken: dict[str, Path]) -> str:
    """A short unused name for a folder added by path."""
    base = path.resolve().name or "dataset"
    name, n = base, 2
    while name in taken and taken[name].resolve() != path.resolve():
        name, n = f"{base}-{n}", n + 1
    return name


def load(root: Path) -> Dataset:
    """Open a dataset for the app: sessions are built per user, when first shown."""
    return load_dataset(root, lazy=True)
