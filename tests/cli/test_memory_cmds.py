"""`pal memory build` / `pal memory trace` as users run them, on a demo user with real embeddings and Chroma."""

import json
import os
import subprocess

import pytest

from tests.cli.test_dataset_cmds import PAL
from tests.conftest import DEMO

pytestmark = pytest.mark.slow


def run(home, *args):
    return subprocess.run([PAL, "memory", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PAL_HOME": str(home)})


def test_build_is_resumable_and_trace_prints_json(tmp_path):
    base = ["--dataset", str(DEMO), "--user", "1000", "--method", "rag-session"]
    first = run(tmp_path, "build", *base, "--until", "1000_sample2")
    assert first.returncode == 0, first.stderr
    assert "[6/6] 1000_sample2: dialogue" in first.stderr
    second = run(tmp_path, "build", *base)
    assert second.returncode == 0
    assert "6/18 stages already done" in second.stderr and "[7/18] 1000_sample3: logs" in second.stderr
    assert json.loads(second.stdout)["stages_done"] == 18
    trace = run(tmp_path, "trace", *base, "--query", "How can I sleep after night shifts?", "--session", "1000_sample7",
                "--purpose", "solution", "--json")
    assert trace.returncode == 0, trace.stderr
    data = json.loads(trace.stdout)
    assert data["as_of_session"] == "1000_sample7" and data["purpose"] == "solution"
    assert 0 < data["tokens"] < data["full_history_tokens"]
    assert data["items"] and all({"layer", "score", "provenance"} <= set(i) for i in data["items"])
    assert all(i["session"] < "1000_sample7" for i in data["items"])


def test_clear_errors(tmp_path):
    res = run(tmp_path, "build", "--dataset", str(DEMO), "--user", "9999", "--method", "vanilla")
    assert res.returncode == 2 and "no user '9999'" in res.stderr
    res = run(tmp_path, "trace", "--dataset", str(DEMO), "--user", "1000", "--method", "vanilla", "--query", "x",
              "--session", "nope")
    assert res.returncode == 2 and "no session 'nope'" in res.stderr
