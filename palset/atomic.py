"""Atomic file replacement with the previous version kept.

A release file is written to a temporary file beside it, flushed to disk, and renamed over the old one
(``os.replace`` is atomic on POSIX): a crash at any moment leaves either the old file or the new one,
whole — never a truncated ``input.json``. Before the rename the old file is kept as ``<name>.prev``
(a hard link, so keeping it costs no copy), so the last version can be restored by hand. The new file keeps the old
one's permission bits (a release shared read-only with a group stays so).

Several files written together (a user added to every release file) go all or nothing (:func:`write_many`): each
new version is staged beside its file, then a journal naming them is written atomically — the commit point — then
the files are replaced and the journal removed. A crash before the journal leaves every file as it was (the next
write removes the staged copies); a crash after it is finished by the next write to the folder (:func:`recover`),
so no user is ever left in some files and not in others.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)
PREVIOUS_SUFFIX = ".prev"
JOURNAL = ".pal-write.json"  # in a dataset folder: a committed multi-file write not yet applied
STAGED_SUFFIX = ".staged"


def previous_path(path: Path) -> Path:
    return path.with_name(path.name + PREVIOUS_SUFFIX)


def write_atomic(path: str | Path, text: str, keep_previous: bool = True) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically; the old content stays in ``<name>.prev``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp makes 0600: keep the file's own mode (or what a new file gets)
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


def _mode_for(path: Path) -> int:
    """The permission bits the replaced file had; for a new file, what ``open()`` would give under the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, racing other threads' files)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        log.debug("no umask in /proc/self/status; assuming 022", exc_info=True)
    return 0o022


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


def _stage(path: Path, text: str) -> Path:
    """The new version of ``path``, written and flushed beside it (not yet in place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=STAGED_SUFFIX, dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def inside_folder(root: Path, path: Path) -> bool:
    """Whether ``path`` stays inside ``root`` once every symbolic link is followed (``root``'s own included)."""
    try:
        return path.resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError):  # a link loop
        return False


def write_many(root: str | Path, texts: dict[Path, str]) -> list[Path]:
    """Replace every file of ``texts`` (paths under ``root``) with its text, all or nothing (see the module). A file,
    or a folder on the way to it, that is a symbolic link out of ``root`` is refused before anything is written."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for path in texts:
        if Path(path).is_symlink() or not inside_folder(root, Path(path)):
            raise ValueError(f"{Path(path).relative_to(root)}: a symbolic link (out of the dataset folder); nothing "
                             "was written — replace it with a plain file or folder")
    recover(root)
    staged: dict[Path, Path] = {}
    try:
        for path, text in texts.items():
            staged[Path(path)] = _stage(Path(path), text)
        entries = [[str(p.relative_to(root)), str(t.relative_to(root))] for p, t in staged.items()]
        write_atomic(root / JOURNAL, json.dumps({"replace": entries}), keep_previous=False)  # the commit point
    except BaseException:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        raise
    _apply(root)
    return list(staged)


def _apply(root: Path) -> None:
    journal = root / JOURNAL
    entries = json.loads(journal.read_text(encoding="utf-8"))["replace"]
    folders = set()
    for target_rel, staged_rel in entries:
        target, staged = root / target_rel, root / staged_rel
        if staged.is_file():  # not yet in place (a write resumed after a crash skips those that are)
            if target.is_file():
                _keep(target)
            os.replace(staged, target)
            folders.add(target.parent)
    for folder in folders:
        _sync_dir(folder)
    journal.unlink()
    _sync_dir(root)


def recover(root: str | Path) -> bool:
    """Finish a committed write that a crash interrupted, and drop what an uncommitted one staged; True when there
    was anything to do."""
    root = Path(root)
    did = False
    if (root / JOURNAL).is_file():
        try:
            _apply(root)
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{root / JOURNAL}: an interrupted write whose journal is unreadable ({e}); "
                             "restore the files from their .prev copies by hand") from None
        log.warning("finished an interrupted write in %s", root)
        did = True
    for leftover in root.rglob(f".*{STAGED_SUFFIX}"):
        leftover.unlink(missing_ok=True)
        did = True
    return did
