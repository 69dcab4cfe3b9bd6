"""Atomic file replacement with the previous version kept.

A release file is written to a temporary file beside it, flushed to disk, and renamed over the old one
(``os.replace`` is atomic on POSIX): a crash at any moment leaves either the old file or the new one,
whole — never a truncated ``input.json``. Before the rename the old file is kept as ``<name>.prev``
(a hard link, so keeping it costs no copy), so the last version can be restored by hand.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)
PREVIOUS_SUFFIX = ".prev"


def previous_path(path: Path) -> Path:
    return path.with_name(path.name + PREVIOUS_SUFFIX)


def write_atomic(path: str | Path, text: str, keep_previous: bool = True) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically; the old content stays in ``<name>.prev``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if keep_previous and path.is_file():
            _keep(path)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _sync_dir(path.parent)
    return path


def _keep(path: Path) -> None:
    prev = previous_path(path)
    staged = prev.with_name(prev.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        staged.unlink()
    try:
        os.link(path, staged)
    except OSError:  # a file system without hard links: copy instead
        log.warning("no hard link for %s; copying the previous version", path, exc_info=True)
        shutil.copy2(path, staged)
    os.replace(staged, prev)


def _sync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        log.warning("cannot open %s to flush the rename", folder, exc_info=True)
        return
    try:
        os.fsync(fd)
    except OSError:
        log.warning("cannot flush the rename in %s", folder, exc_info=True)
    finally:
        os.close(fd)
