"""Hostile bundles (audit findings 3, 7, 8, 18): each is refused with "refused: <why>" — never a raw exception — before
it costs memory, and leaves the target unchanged. Rows are checked against the records the app writes, so a bundle
re-signed by hand (checksums made to match) cannot bring an unknown task, a run status no view knows, a record of
another dataset with that machine's folder, or a batch id that breaks out of a code span."""

from __future__ import annotations

import hashlib
import json
import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from palset.loader import load_dataset
from studio.bundle.export import export_bundle
from studio.bundle.importer import BundleError, import_bundle, read_bundle
from studio.bundle.manifest import MANIFEST, table_member
from testkit.worked import fill_home
from testkit.workspace import make_workspace
from tests.conftest import DEMO

pytestmark = pytest.mark.slow(seconds=3)  # the module bundle once (a few seconds), then each refusal well under one


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """A real bundle of demo user 1000 (gold and rag-turn builds, runs, judgments, a review batch)."""
    home = tmp_path_factory.mktemp("hostile")
    mp = pytest.MonkeyPatch()
    mp.setenv("PAL_EMBEDDER", "hash")
    ws = make_workspace(home / "pal", env={"PAL_EMBEDDER": "hash"})
    dataset = load_dataset(DEMO)
    fill_home(ws, dataset, ["1000"], experiment=False, fidelity=False)
    out = home / "work.palbundle"
    export_bundle(ws, dataset, out, how=["a test"])
    yield out
    mp.undo()


@pytest.fixture
def target(tmp_path):
    return make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})


def members_of(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def write(path: Path, members: dict[str, bytes], resign: bool = True) -> Path:
    """A zip of ``members``; ``resign``: the manifest's sizes, row counts and checksums made to match (what an attacker
    who edits a bundle does)."""
    if resign:
        manifest = json.loads(members[MANIFEST])
        for name, info in manifest["members"].items():
            data = members[name]
            info.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), rows=data.count(b"\n"))
        for table, info in manifest["tables"].items():
            info["rows"] = members[table_member(table)].count(b"\n")
        members = {**members, MANIFEST: json.dumps(manifest).encode()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def edit_rows(members: dict[str, bytes], table: str, change) -> dict[str, bytes]:
    name = table_member(table)
    rows = [json.loads(line) for line in members[name].decode().splitlines()]
    change(rows)
    return {**members, name: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()}


def refused(target, path: Path, match: str) -> str:
    before = target.tables.select("memory_builds", ["build_id"])
    with pytest.raises(BundleError, match=match) as caught:
        import_bundle(target, path, known={"demo": DEMO})
    assert ": refused: " in str(caught.value) and str(path.parent) not in str(caught.value)  # no server path
    assert target.tables.select("memory_builds", ["build_id"]) == before and not target.tables.imports()
    return str(caught.value)


def test_the_untouched_bundle_imports(bundle, target):
    assert import_bundle(target, bundle, known={"demo": DEMO}).total_added > 0


# ---------------------------------------------------------------------------------------- finding 3: memory


def _stream_member(path: Path, members: dict[str, bytes], big: str, size: int) -> Path:
    """``members`` plus ``big``: ``size`` zero bytes, written as a stream (small on disk, never held in memory)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
        with z.open(big, "w", force_zip64=True) as f:
            chunk = b" " * (1 << 20)
            for _ in range(size >> 20):
                f.write(chunk)
    return path


def test_a_huge_manifest_is_refused_before_it_is_read(bundle, target, tmp_path):
    """Audit: a 3.2 MB bundle whose manifest inflates to 2 GiB took 4.3 GB of memory (read whole, then parsed)."""
    members = members_of(bundle)
    del members[MANIFEST]
    path = _stream_member(tmp_path / "bomb.palbundle", members, MANIFEST, 64 << 20)
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    refused(target, path, "manifest.json is larger than 8 MiB")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 << 20


def test_a_member_larger_than_the_server_accepts_is_refused_by_the_bytes_read(bundle, target, tmp_path,
                                                                                monkeypatch):
    """Audit: a 1.7 MB bundle with a 512 MiB member took 5.4 GB before it was refused (only declared sizes counted)."""
    monkeypatch.setenv("PAL_MAX_BUNDLE_MB", "16")
    members = members_of(bundle)
    name = table_member("memory_items")
    big = tmp_path / "big.palbundle"
    _stream_member(big, {k: v for k, v in members.items() if k != name}, name, 64 << 20)
    manifest = json.loads(members[MANIFEST])
    manifest["members"][name]["bytes"] = 64 << 20  # declared honestly: refused before reading
    with zipfile.ZipFile(big) as z:
        rebuilt = {n: z.read(n) for n in z.namelist() if n != name}
    rebuilt[MANIFEST] = json.dumps(manifest).encode()
    honest = _stream_member(tmp_path / "honest.palbundle", rebuilt, name, 64 << 20)
    tracemalloc.start()
    refused(target, honest, "hold 64 MiB, more than this server accepts")
    assert tracemalloc.get_traced_memory()[1] < 32 << 20
    tracemalloc.stop()


def test_a_member_whose_entry_lies_about_its_size_is_refused_by_what_comes_out(bundle, target, tmp_path):
    members = members_of(bundle)
    name = table_member("memory_items")
    manifest = json.loads(members[MANIFEST])
    manifest["members"][name]["bytes"] = len(members[name]) // 2  # the manifest and the zip entry agree, and lie
    path = write(tmp_path / "lie.palbundle", {**members, MANIFEST: json.dumps(manifest).encode()}, resign=False)
    raw = bytearray(path.read_bytes())
    # shrink the uncompressed size in the member's local and central headers: the inflated bytes are more than it says
    data = members[name]
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (at := raw.find(sig, start)) >= 0:
            name_len_at = 26 if sig == b"PK\x03\x04" else 28
            n = struct.unpack_from("<H", raw, at + name_len_at)[0]
            header = 30 if sig == b"PK\x03\x04" else 46
            if bytes(raw[at + header:at + header + n]) == name.encode():
                struct.pack_into("<I", raw, at + offset, len(data) // 2)
            start = at + 4
    path.write_bytes(bytes(raw))
    refused(target, path, "memory_items.jsonl: (the zip data is damaged|checksum mismatch)")


# ---------------------------------------------------------------------------------------- finding 8: no raw errors


def _deep_manifest(members):
    return {**members, MANIFEST: b"[" * 200_000 + b"]" * 200_000}


def _latin1_manifest(members):
    return {**members, MANIFEST: members[MANIFEST].replace(b'"how": [', b'"how": ["\xe9\xff", ', 1)}


def _deep_row(members):
    name = table_member("memory_items")
    return {**members, name: members[name] + b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"}


def _null_in_not_null(members):
    return edit_rows(members, "memory_build_stages", lambda rows: rows[0].update(stage=None))


def _orphan_item(members):
    return edit_rows(members, "review_items", lambda rows: rows[0].update(batch_id="b-00000000"))


@pytest.mark.parametrize(("edit", "why"), [
    (_deep_manifest, "manifest.json: JSON nested too deeply"),
    (_latin1_manifest, "manifest.json: not UTF-8"),
    (_deep_row, "memory_items.jsonl line .*nested too deeply|the row's columns differ"),
    (_null_in_not_null, "cannot be imported here .*IntegrityError|stage"),
    (_orphan_item, "batch_id 'b-00000000' names no record of the bundle"),
])
def test_malformed_content_is_refused_with_a_reason(bundle, target, tmp_path, edit, why):
    resign = edit not in (_deep_manifest, _latin1_manifest)  # nothing to re-sign in a manifest that does not parse
    refused(target, write(tmp_path / "bad.palbundle", edit(members_of(bundle)), resign=resign), why)


def _patch_header(path: Path, field_offset: int, value: int, size: str = "<H") -> Path:
    """Set a field of the first local header and its central directory entry (offsets of the local header)."""
    raw = bytearray(path.read_bytes())
    struct.pack_into(size, raw, field_offset, value)  # local file header
    central = raw.find(b"PK\x01\x02")
    struct.pack_into(size, raw, central + field_offset + 2, value)  # same field, 2 bytes later in the central entry
    path.write_bytes(bytes(raw))
    return path


def test_an_encrypted_member_is_refused(bundle, target, tmp_path):
    path = write(tmp_path / "enc.palbundle", members_of(bundle), resign=False)
    refused(target, _patch_header(path, 6, 0x1), "is encrypted")


def test_an_unknown_compression_method_is_refused(bundle, target, tmp_path):
    path = write(tmp_path / "c97.palbundle", members_of(bundle), resign=False)
    refused(target, _patch_header(path, 8, 97), "compression method 97")


def test_a_truncated_or_non_zip_file_is_refused(bundle, target, tmp_path):
    cut = tmp_path / "cut.palbundle"
    cut.write_bytes(bundle.read_bytes()[: bundle.stat().st_size // 2])
    refused(target, cut, "not a PAL Studio bundle")
    text = tmp_path / "notes.palbundle"
    text.write_text("hello", encoding="utf-8")
    refused(target, text, "not a readable zip")
    refused(target, tmp_path / "absent.palbundle", "no such file")


def test_duplicate_member_names_are_refused(bundle, target, tmp_path):
    """Audit finding 18: two entries with one name were accepted (the last one won)."""
    members = members_of(bundle)
    path = tmp_path / "dup.palbundle"
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
        z.writestr(table_member("sim_turns"), members[table_member("sim_turns")].replace(b"I", b"You"))
    refused(target, path, "more than one entry named tables/sim_turns.jsonl")


def test_too_many_entries_are_refused_before_the_zip_is_parsed(bundle, target, tmp_path):
    path = tmp_path / "many.palbundle"
    with zipfile.ZipFile(path, "w") as z:
        for i in range(100):
            z.writestr(f"x{i}", b"")
    refused(target, path, "declares 100 entries")


# ---------------------------------------------------------------------------------------- finding 7: rows


def _status(rows):
    rows[0]["status"] = "exploded"
    data = json.loads(rows[0]["data"])
    data["status"] = "exploded"
    rows[0]["data"] = json.dumps(data)


def _task(rows):
    rows[0]["task"] = "essay"


def _foreign_dataset(rows):
    rows[0]["dataset"] = "/srv/other-lab/private-data"


def _backtick_batch(rows):
    rows[0]["batch_id"] = "b-1`[x](https://evil.example)`"


def _unknown_method(rows):
    rows[0]["method"] = "exfiltrate"


def _answer_value(rows):
    rows[0]["value"] = "[click](https://evil.example)"


@pytest.mark.parametrize(("table", "change", "why"), [
    ("sim_runs", _status, "sim_runs.jsonl line 1: status"),
    ("review_batches", _task, "review_batches.jsonl line 1: task"),
    ("review_batches", _foreign_dataset, "review_batches.jsonl line 1: a record of another dataset"),
    ("sim_runs", _foreign_dataset, "sim_runs.jsonl line 1: a record of another dataset"),
    ("review_batches", _backtick_batch, "review_batches.jsonl line 1: batch_id"),
    ("memory_builds", _unknown_method, "method 'exfiltrate' is not a memory method"),
    ("review_answers", _answer_value, "is not an answer to"),
])
def test_rows_the_app_would_not_write_are_refused(bundle, target, tmp_path, table, change, why):
    members = edit_rows(members_of(bundle), table, change)
    message = refused(target, write(tmp_path / "rows.palbundle", members), why)
    assert "/srv/other-lab" not in message


def test_read_bundle_alone_never_raises_anything_else(bundle, tmp_path):
    for edit in (_deep_manifest, _latin1_manifest):
        with pytest.raises(BundleError):
            read_bundle(write(tmp_path / "x.palbundle", edit(members_of(bundle)), resign=False))


def test_an_empty_required_column_is_refused_by_name_without_a_traceback(bundle, target, tmp_path, caplog):
    """A NULL in a NOT NULL column is a foreseen refusal (member, line, column), not the database's error logged with
    its traceback at ERROR."""
    import logging

    members = edit_rows(members_of(bundle), "memory_build_stages", lambda rows: rows[0].update(stage=None))
    with caplog.at_level(logging.INFO):
        refused(target, write(tmp_path / "null.palbundle", members), "memory_build_stages.jsonl line 1: stage is empty")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
