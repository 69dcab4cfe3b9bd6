"""Reading a bundle file that may be hostile: every byte counted as it is read, nothing trusted before it is checked.

The bundle is a zip from anyone (a sidebar upload on a shared server, a colleague's file), so, before anything is
decompressed: the file's size and number of entries are bounded; no two entries share a name (a zip may hold both,
and readers disagree on which one counts); no entry is encrypted or compressed by a method other than stored or
deflate; the manifest is at most :data:`MAX_MANIFEST_BYTES`. Then every member is read as a stream, its **actual**
bytes counted against what the manifest declares and against ``PAL_MAX_BUNDLE_MB`` (default 1024) for the whole
bundle, and hashed on the way; rows are parsed line by line. A refusal is a :class:`BundleError` whose text says
``refused: <why>`` and names the file (never a server path).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

MAX_MANIFEST_BYTES = 8 * 1024**2
MAX_ENTRIES = 64  # a bundle holds a manifest, prompts and one member per record kind
MAX_LINE_BYTES = 256 * 1024**2
CHUNK = 1 << 20
ALLOWED_COMPRESSION = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


class BundleError(ValueError):
    """A bundle that is refused; the message says why and what to do. Nothing was imported."""

    def __init__(self, path: Path | str, reason: str):
        self.path, self.reason = Path(path), reason
        super().__init__(f"{self.path.name}: refused: {reason}")


def max_bundle_bytes(env: Mapping[str, str] | None = None) -> int:
    """``PAL_MAX_BUNDLE_MB`` (default 1024): the most bytes a bundle's members may hold, uncompressed."""
    env = os.environ if env is None else env
    try:
        mb = float(env.get("PAL_MAX_BUNDLE_MB") or 1024)
    except ValueError:
        mb = 1024.0
    return int(max(mb, 1.0) * 1024**2)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _entry_count(path: Path) -> int | None:
    """How many entries the zip's end record declares (read before :class:`zipfile.ZipFile` builds one object per
    entry); None when it cannot be read (the zip module then says what is wrong)."""
    try:
        with open(path, "rb") as f:
            end = zipfile._EndRecData(f)  # type: ignore[attr-defined]  # the zip module's own end-record reader
    except (OSError, ValueError, TypeError):
        return None
    return int(end[zipfile._ECD_ENTRIES_TOTAL]) if end else None  # type: ignore[attr-defined]  # its index name


def open_archive(path: Path, limit: int) -> zipfile.ZipFile:
    """The zip at ``path`` once its size, entry count, names, encryption and compression are acceptable."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise BundleError(path, "no such file") from None
    if size > limit:
        raise BundleError(path, f"the file is {size >> 20} MiB, more than this server accepts "
                                f"({limit >> 20} MiB, PAL_MAX_BUNDLE_MB)")
    entries = _entry_count(path)
    if entries is not None and entries > MAX_ENTRIES:
        raise BundleError(path, f"the zip declares {entries} entries; a bundle has at most {MAX_ENTRIES}")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, NotImplementedError) as e:
        raise BundleError(path, f"not a PAL Studio bundle (not a readable zip file: {e})") from None
    try:
        infos = archive.infolist()
        names = [i.filename for i in infos]
        if len(infos) > MAX_ENTRIES:
            raise BundleError(path, f"the zip holds {len(infos)} entries; a bundle has at most {MAX_ENTRIES}")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise BundleError(path, f"the zip holds more than one entry named {', '.join(duplicates[:5])} (a bundle "
                                    "names each member once; the file was changed after it was made)")
        for info in infos:
            if info.flag_bits & 0x1:
                raise BundleError(path, f"{info.filename} is encrypted; bundles are never encrypted")
            if info.compress_type not in ALLOWED_COMPRESSION:
                raise BundleError(path, f"{info.filename} uses compression method {info.compress_type}; bundles use "
                                        "stored or deflate only")
    except BaseException:
        archive.close()
        raise
    return archive


def read_capped(path: Path, archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    """A member's bytes, refused as soon as more than ``limit`` come out (whatever its entry declares)."""
    out = bytearray()
    for chunk in _chunks(path, archive, name):
        out += chunk
        if len(out) > limit:
            raise BundleError(path, f"{name} is larger than {limit >> 10} KiB")
    return bytes(out)


def _chunks(path: Path, archive: zipfile.ZipFile, name: str) -> Iterator[bytes]:
    try:
        with archive.open(name) as stream:
            yield from iter(lambda: _read(stream), b"")
    except BundleError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError, ValueError) as e:
        raise BundleError(path, f"{name}: the zip data is damaged ({e})") from None


def _read(stream: IO[bytes]) -> bytes:
    return stream.read(CHUNK)


def member_lines(path: Path, archive: zipfile.ZipFile, name: str, declared: int, expected_sha: str,
                 budget: list[int]) -> Iterator[bytes]:
    """The lines of a member, read as a stream: refused when more bytes come out than the manifest declares (or
    than the bundle's ``budget``, shared by its members, allows), or when the SHA-256 differs at the end."""
    h, total, pending = hashlib.sha256(), 0, bytearray()
    for chunk in _chunks(path, archive, name):
        total += len(chunk)
        if total > declared:
            raise BundleError(path, f"{name} holds more bytes than its manifest declares ({declared}); the file was "
                                    "changed after it was made")
        budget[0] -= len(chunk)
        if budget[0] < 0:
            raise BundleError(path, "more data than this server accepts in one bundle (PAL_MAX_BUNDLE_MB)")
        h.update(chunk)
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", start)) >= 0:
            yield bytes(pending[start:end])
            start = end + 1
        del pending[:start]
        if len(pending) > MAX_LINE_BYTES:
            raise BundleError(path, f"{name} has a line longer than {MAX_LINE_BYTES >> 20} MiB")
    if pending:
        yield bytes(pending)
    if total != declared or h.hexdigest() != expected_sha:
        raise BundleError(path, f"{name}: checksum mismatch (the file was changed or damaged after it was made); "
                                "nothing was imported")


def parse_json(path: Path, where: str, raw: bytes) -> object:
    """JSON from the bundle: not UTF-8, not JSON or nested too deeply is a refusal naming where."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BundleError(path, f"{where}: not UTF-8 text") from None
    except RecursionError:
        raise BundleError(path, f"{where}: JSON nested too deeply") from None
    except ValueError as e:
        raise BundleError(path, f"{where}: not JSON ({e})") from None
