"""`pal memory build` / `pal memory trace` as users run them, on a demo user with Chroma (the hash embedder: the
real embedders are tested in tests/backends/test_vectorstore.py and tests/evaluation/test_fidelity_threshold.py)."""

import json
import os
import subprocess
import sys

import pytest

from tests.cli.test_dataset_cmds import PAL
from tests.conftest import DEMO, ROOT

pytestmark = pytest.mark.slow


def run(home, *args):
    return subprocess.run([PAL, "memory", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PAL_HOME": str(home), "PAL_EMBEDDER": "hash"})


@pytest.mark.slow(seconds=8)
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


def test_build_with_an_llm_shows_calls_in_flight_and_cached_tokens(tmp_path):
    from testkit.fault_server import serving
    from testkit.slot_server import SlotServer

    server = SlotServer(latency=0.01, slots=2)
    with serving(server.httpd):
        res = subprocess.run([sys.executable, "-m", "cli", "memory", "build", "--dataset", str(DEMO), "--user", "1000",
                              "--method", "h2memory", "--until", "1000_sample0"], capture_output=True, text=True,
                             timeout=300, cwd=ROOT,  # this checkout's code
                             env={**os.environ, "PAL_HOME": str(tmp_path), "PAL_EMBEDDER": "hash",
                                  "PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_MODEL": "slot-model",
                                  "PAL_DEFAULT_BASE_URL": server.base_url})
    assert res.returncode == 0, res.stderr
    assert "[2/2] 1000_sample0: dialogue · 0 calls in flight ·" in res.stderr
    assert "prompt tokens from the server's cache" in res.stderr
    out = json.loads(res.stdout)
    assert out["stages_done"] == 2 and 0 < out["tokens_cached"] < out["tokens_in"]
