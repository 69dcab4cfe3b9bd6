"""Release files survive crashes and hostile content: atomic replacement with the previous version kept, a
kill mid-write leaves the old file whole, huge or deeply nested JSON is a problem naming the file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from palset.assemble import write_release
from palset.atomic import previous_path, write_atomic
from palset.loader import load_dataset
from tests.conftest import ROOT

CHILD = """
import os, sys, time
sys.path.insert(0, {root!r})
import palset.atomic as atomic
def stall(fd):  # every byte of the new version is written: stop right before the rename
    print("writing", flush=True)
    time.sleep(60)
atomic.os.fsync = stall
atomic.write_atomic(sys.argv[1], "NEW " * 2_000_000)
"""


def test_a_kill_mid_write_leaves_the_old_file_whole(tmp_path):
    target = tmp_path / "input.json"
    old = json.dumps({"0000": {"history": [], "query": []}})
    target.write_text(old, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(ROOT)), str(target)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    assert sum(p.stat().st_size for p in tmp_path.glob(".input.json.*.tmp")) >= 8_000_000  # the new text is out
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert target.read_text(encoding="utf-8") == old  # whole, not truncated
    assert json.loads(target.read_text(encoding="utf-8"))


def test_each_write_is_atomic_and_keeps_the_previous_version(tmp_path):
    target = tmp_path / "sub" / "f.json"
    write_atomic(target, "one")
    assert target.read_text() == "one" and not previous_path(target).exists()
    write_atomic(target, "two")
    write_atomic(target, "three")
    assert target.read_text() == "three" and previous_path(target).read_text() == "two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.json", "f.json.prev"]  # no temp file left


def test_release_writes_keep_the_previous_files_and_refuse_an_unreadable_one(tmp_path):
    from testkit.release import make_bundle

    root = tmp_path / "rel"
    write_release(root, [make_bundle("0001", sessions=2, logs_per_session=2, turns=2)])
    before = (root / "input.json").read_text(encoding="utf-8")
    write_release(root, [make_bundle("0002", sessions=2, logs_per_session=2, turns=2)])
    assert previous_path(root / "input.json").read_text(encoding="utf-8") == before
    assert set(load_dataset(root).users) == {"0001", "0002"}
    (root / "input.json").write_text('{"0001": ', encoding="utf-8")  # broken by hand
    with pytest.raises(ValueError, match=r"input.json: cannot add users to it: invalid JSON"):
        write_release(root, [make_bundle("0003", sessions=2, logs_per_session=2, turns=2)])
    assert (root / "input.json").read_text(encoding="utf-8") == '{"0001": '  # nothing written over it


@pytest.mark.parametrize("depth", [1_020, 5_000, 200_000])
def test_deeply_nested_json_is_a_problem_naming_the_file(small_release, depth):
    path = small_release / "background" / "background.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    uid = next(iter(data))
    data[uid]["name"] = "@@"
    path.write_text(json.dumps(data).replace('"@@"', "[" * depth + "]" * depth), encoding="utf-8")
    t0 = time.perf_counter()
    ds = load_dataset(small_release)
    problems = [str(p) for p in ds.problems if p.file.startswith("background")]
    assert problems and all(len(p) < 300 for p in problems), problems
    assert problems[0].startswith("background/background.json: ")
    assert time.perf_counter() - t0 < 20
    assert ds.users  # the other files still load


def test_a_file_over_the_size_cap_is_refused_naming_the_file(small_release, monkeypatch):
    monkeypatch.setenv("PAL_MAX_JSON_MB", "0.001")
    ds = load_dataset(small_release)
    assert any(p.file == "input.json" and "PAL_MAX_JSON_MB" in p.message for p in ds.problems)


def test_a_replaced_file_keeps_its_permission_bits(tmp_path):
    """Audit finding 21: atomic writes turned release files 0644 (readable by the group) into 0600."""
    import stat

    target = tmp_path / "input.json"
    target.write_text("{}", encoding="utf-8")
    target.chmod(0o644)
    write_atomic(target, '{"a": 1}')
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    target.chmod(0o640)
    write_atomic(target, '{"a": 2}')
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    fresh = tmp_path / "new.json"
    write_atomic(fresh, "{}")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~_umask()
    root = tmp_path / "rel"
    from testkit.release import make_bundle

    write_release(root, [make_bundle("0001", sessions=1, logs_per_session=1, turns=1)])
    (root / "input.json").chmod(0o644)
    write_release(root, [make_bundle("0002", sessions=1, logs_per_session=1, turns=1)])
    assert stat.S_IMODE((root / "input.json").stat().st_mode) == 0o644


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


KILL_BETWEEN_FILES = """
import os, sys, time
sys.path.insert(0, {root!r})
import palset.atomic as atomic
from palset.assemble import write_release
from testkit.release import make_bundle
real, done, real_stage, staged = os.replace, [], atomic._stage, []
def replace(src, dst):  # the journal, then {replaced} release file(s) go in place; then the process stalls
    real(src, dst)
    if str(dst).endswith(".json") and not str(dst).endswith(atomic.JOURNAL):
        done.append(dst)
        if len(done) == {replaced}:
            print("between files", flush=True)
            time.sleep(60)
def stage(path, text):  # with 0: two files staged, no journal yet; then the process stalls
    staged.append(real_stage(path, text))
    if {replaced} == 0 and len(staged) == 2:
        print("between files", flush=True)
        time.sleep(60)
    return staged[-1]
atomic.os.replace = replace
atomic._stage = stage
write_release(sys.argv[1], [make_bundle("0002", sessions=2, logs_per_session=2, turns=2)])
"""


@pytest.mark.parametrize("replaced", [0, 2])
def test_a_kill_between_release_files_never_leaves_a_half_added_user(tmp_path, replaced):
    """Audit finding 9: kill -9 while a user was being added left them in some files and not others, and
    ``pal validate`` said nothing. Now the write is all or nothing: killed before its journal, nothing changed; after
    it, the next write (or a resumed generation) finishes it. ``pal validate`` reports the interrupted state."""
    from testkit.release import make_bundle

    root = tmp_path / "rel"
    write_release(root, [make_bundle("0001", sessions=2, logs_per_session=2, turns=2)])
    before = {p: p.read_bytes() for p in root.rglob("*.json")}
    code = KILL_BETWEEN_FILES.replace("{replaced}", str(replaced)).format(root=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "between files"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    half = load_dataset(root)
    if replaced:
        messages = [str(p) for p in half.problems]
        assert any("user 0002 is missing here" in m for m in messages) and any(".pal-write.json" in m for m in messages)
    else:
        assert {p: p.read_bytes() for p in root.rglob("*.json")} == before  # untouched
        assert len(list(root.rglob("*.staged"))) == 2  # what the next write removes
    write_release(root, [make_bundle("0003", sessions=2, logs_per_session=2, turns=2)])  # the next write
    dataset = load_dataset(root)
    assert set(dataset.users) == ({"0001", "0002", "0003"} if replaced else {"0001", "0003"})
    assert not [p for p in dataset.problems if p.level == "error"], dataset.problems
    assert not list(root.rglob("*.staged")) and not (root / ".pal-write.json").exists()


def test_validate_names_a_user_missing_from_some_files(small_release):
    data = json.loads((small_release / "timeline" / "timeline.json").read_text(encoding="utf-8"))
    gone = sorted(data)[0]
    del data[gone]
    (small_release / "timeline" / "timeline.json").write_text(json.dumps(data), encoding="utf-8")
    problems = [str(p) for p in load_dataset(small_release).problems]
    assert any(p.startswith("timeline/timeline.json: " + gone) and f"user {gone} is missing here" in p
               for p in problems), problems


def test_links_out_of_the_dataset_folder_are_neither_read_nor_written_through(tmp_path):
    """Audit finding 22: symbolic links inside an allowed folder were followed, reading and writing outside it."""
    from testkit.release import make_bundle, make_release

    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.json"
    secret.write_text(json.dumps({"9999": {"name": "someone else's"}}), encoding="utf-8")
    root = make_release(tmp_path / "ds", users=1, sessions=2, logs_per_session=2, turns=2, query_sessions=1)
    (root / "timeline" / "timeline.json").unlink()
    (root / "timeline" / "timeline.json").symlink_to(secret)
    dataset = load_dataset(root)
    assert "9999" not in dataset.users
    assert any("timeline/timeline.json" in str(p) and "symbolic link out of the dataset folder" in str(p)
               and str(outside) not in str(p) for p in dataset.problems)
    (root / "timeline" / "timeline.json").unlink()
    shutil_move = __import__("shutil").move
    shutil_move(str(root / "background"), str(outside / "background"))
    (root / "background").symlink_to(outside / "background", target_is_directory=True)
    before = (outside / "background" / "background.json").read_bytes()
    with pytest.raises(ValueError, match="background/background.json: a symbolic link"):
        write_release(root, [make_bundle("0005", sessions=1, logs_per_session=1, turns=1)])
    assert (outside / "background" / "background.json").read_bytes() == before
    assert not list(root.rglob("*.staged")) and not list(outside.rglob("*.staged"))
