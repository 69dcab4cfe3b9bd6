"""`pal workspace export | import | inspect` as people run them: a home with records → one file → another home,
twice; a changed file and a missing dataset are refused (exit 2) with what to do; gold built with `pal memory`."""

from __future__ import annotations

import json
import os
import subprocess
import zipfile

import pytest

from tests.cli.test_dataset_cmds import PAL
from tests.conftest import DEMO

pytestmark = pytest.mark.slow


def pal(home, *args, **env):
    return subprocess.run([PAL, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PAL_HOME": str(home), "PAL_EMBEDDER": "hash", **env})


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    home = tmp_path_factory.mktemp("cli")
    for user in ("1000", "1006"):  # an English and a Chinese user
        res = pal(home / "src", "memory", "build", "--dataset", str(DEMO), "--user", user, "--method", "gold")
        assert res.returncode == 0, res.stderr
    out = home / "demo.palbundle"
    res = pal(home / "src", "workspace", "export", "--dataset", "demo", "--out", str(out), "--how", "two gold builds",
              "--json")
    assert res.returncode == 0, res.stderr
    return home, out, json.loads(res.stdout)


def test_export_writes_one_file_with_a_manifest(exported):
    _, out, manifest = exported
    assert manifest["tables"]["memory_builds"]["rows"] == 2 and manifest["methods"] == {"gold": 2}
    assert manifest["how"] == ["two gold builds"] and manifest["dataset"]["name"] == "demo"
    with zipfile.ZipFile(out) as z:
        assert "manifest.json" in z.namelist() and "tables/memory_items.jsonl" in z.namelist()


def test_import_twice_adds_nothing_the_second_time(exported, tmp_path):
    _, out, manifest = exported
    first = pal(tmp_path, "workspace", "import", str(out), "--json")
    assert first.returncode == 0, first.stderr
    added = json.loads(first.stdout)["added"]
    assert added["memory_builds"] == 2 and added["memory_items"] == manifest["tables"]["memory_items"]["rows"]
    second = pal(tmp_path, "workspace", "import", str(out))
    assert second.returncode == 0 and "0 rows added" in second.stderr and "nothing new" in second.stderr
    from testkit.workspace import make_workspace

    imports = make_workspace(tmp_path).audit.entries(action="bundle.import")  # audit finding 19
    assert [(e.target, e.actor.startswith("cli")) for e in imports] == [(out.name, True)] * 2
    trace = pal(tmp_path, "memory", "trace", "--dataset", str(DEMO), "--user", "1006", "--method", "gold",
                "--query", "孩子的学习", "--json")
    assert trace.returncode == 0 and json.loads(trace.stdout)["items"]  # the imported build, its vectors rebuilt


def test_inspect_and_refusals_say_what_is_wrong(exported, tmp_path):
    _, out, _ = exported
    info = pal(tmp_path, "workspace", "inspect", str(out))
    assert info.returncode == 0 and "bundle of dataset demo" in info.stdout and "memory_items" in info.stdout
    bad = tmp_path / "bad.palbundle"
    with zipfile.ZipFile(out) as src, zipfile.ZipFile(bad, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            dst.writestr(name, data.replace(b"1000_sample1", b"1000_sampleX", 1) if name.endswith("items.jsonl") else data)
    res = pal(tmp_path, "workspace", "import", str(bad))
    assert res.returncode == 2 and "checksum mismatch" in res.stderr
    from testkit.release import make_release

    other = make_release(tmp_path / "other", users=2, sessions=3, logs_per_session=5, turns=6, query_sessions=1)
    res = pal(tmp_path / "h2", "workspace", "import", str(out), "--dataset", str(other))
    assert res.returncode == 2 and "not the one the records were made on" in res.stderr
    assert "missing user(s) 1000, 1006" in res.stderr
