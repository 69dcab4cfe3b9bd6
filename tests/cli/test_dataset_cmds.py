"""`pal validate` and `pal stats` as a user runs them: a real subprocess of the installed console script."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO, PALSET, read, require_shared, write

PAL = shutil.which("pal", path=str(Path(sys.executable).parent)) or "pal"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PAL, *args], capture_output=True, text=True, timeout=120)


def test_validate_demo_passes():
    res = run("validate", str(DEMO))
    assert res.returncode == 0, res.stdout
    assert "valid: 8 users, 72 sessions, 0 error(s)" in res.stderr


def test_validate_partial_real_release_passes_with_notes():
    res = run("validate", str(require_shared(PALSET / "data_en")))
    assert res.returncode == 0
    assert "note: samples file absent" in res.stderr


def test_validate_reports_one_line_per_problem_and_exits_non_zero(small_release):
    path = small_release / "input.json"
    data = read(path)
    data["0000"]["history"][0]["logs"][0]["timestamp"] = "2024-13-01 9:00"
    data["0000"]["history"][1]["dialogue"]["turn_1"]["assistant"]["action"] = "<乱码>"
    write(path, data)
    (small_release / "timeline" / "timeline.json").write_bytes(b"\xff\xfe{")
    res = run("validate", str(small_release))
    assert res.returncode == 1
    assert "Traceback" not in res.stdout + res.stderr
    lines = res.stdout.strip().splitlines()
    assert 'input.json: 0000.history[0].logs[0].timestamp: "2024-13-01 9:00" is not YYYY-MM-DD HH:MM' in lines
    assert any(line.startswith("input.json: 0000.history[1].dialogue.turn_1.assistant.action: ") for line in lines)
    assert any(line.startswith("timeline/timeline.json: (top level): not valid UTF-8") for line in lines)
    assert all(line.count(": ") >= 2 for line in lines)


@pytest.mark.parametrize("target", ["missing-folder", "a-file.txt"])
def test_validate_never_crashes_on_a_bad_path(tmp_path, target):
    (tmp_path / "a-file.txt").write_text("hi")
    res = run("validate", str(tmp_path / target))
    assert res.returncode == 1 and "Traceback" not in res.stderr


def test_stats_json_has_the_documented_keys():
    res = run("stats", str(DEMO), "--json")
    assert res.returncode == 0
    stats = json.loads(res.stdout)
    for key in ("users", "sessions", "history_sessions", "query_sessions", "logs", "dialogue_turns", "topics",
                "log_types", "per_user"):
        assert key in stats
    assert stats["sessions"] == stats["history_sessions"] + stats["query_sessions"]
    assert set(stats["per_user"]) == set(read(DEMO / "background" / "background.json"))
    assert stats["per_user"]["1000"]["logs"] > 100
