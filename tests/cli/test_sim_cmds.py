"""`pal simulate` / `pal runs` as users run them, against a real local HTTP server that misbehaves at random.

The property: whatever the endpoint does (429, 500, answers slower than the timeout, broken JSON) and
however the process ends (SIGKILL mid-way), re-running the same command leaves every run finished
with each utterance of its schedule present exactly once.
"""

import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time

import pytest

from backends.paths import StatePaths
from testkit.fault_server import FaultServer, completion
from testkit.release import make_release
from tests.cli.test_dataset_cmds import PAL

pytestmark = pytest.mark.slow

JS = {"content-type": "application/json"}


def sse(text: str, model: str) -> bytes:
    """A streamed chat completion: one chunk per word, a finishing chunk, then [DONE]."""
    def chunk(delta: dict, finish=None) -> str:
        body = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(body)}\n\n"
    words = [w + " " for w in text.split(" ")]
    return "".join([chunk({"role": "assistant", "content": ""}), *(chunk({"content": w}) for w in words),
                    chunk({}, "stop"), "data: [DONE]\n\n"]).encode()


def answer(body: dict) -> tuple[int, dict, bytes]:
    """Well-formed answers: JSON for structured (free-mode user simulator) requests, a sentence otherwise, SSE when
    streamed (the user's words for the User-LLM, so no turn is asked three times for speaking like the assistant)."""
    model = body.get("model", "fake")
    if body.get("stream"):  # the User-LLM (fixed mode) speaks as the user, the assistant as the assistant
        as_user = any(m["content"].startswith("You write the chat messages") for m in body["messages"]
                      if m["role"] == "system")
        text = "I would like some help with my week, please." if as_user else "Here is one idea that could fit your week."
        return 200, {"content-type": "text/event-stream"}, sse(text, model)
    asks_json = any("JSON" in m["content"] for m in body["messages"] if m["role"] == "system")
    text = json.dumps({"content": "I would like some help with this, please."}) if asks_json else "Try a short plan."
    return 200, JS, json.dumps(completion(text, model)).encode()


def faulty(seed: int, latency: float = 0.0):
    """A server behaviour injecting, at random (seeded): 429 (Retry-After 0), 500, too slow, broken JSON."""
    rng, lock = random.Random(seed), threading.Lock()

    def respond(body: dict) -> tuple[int, dict, bytes]:
        with lock:
            r = rng.random()
        time.sleep(latency)
        if r < 0.08:
            return 429, {**JS, "retry-after": "0"}, b'{"error": {"message": "slow down"}}'
        if r < 0.15:
            return 500, JS, b'{"error": {"message": "boom"}}'
        if r < 0.18:
            time.sleep(5.5)  # beyond the 5 s timeout (2 s timed out answers that were only slow on a busy machine)
            return answer(body)
        if r < 0.24:
            if body.get("stream"):
                return 200, {"content-type": "text/event-stream"}, b'data: {"choices": [{"delta": {"content": "tru\n\n'
            return 200, JS, b'{"choices": [{"message": {"content": "trunc'
        return answer(body)
    return respond


def env_for(home, url):
    """A quarter of the fault server's answers fail: at 6 retries one call of the ~300 a batch makes failed all 7
    attempts about once in 70 batches (0.24⁷ a call); at 10, once in ~20,000."""
    return {**os.environ, "PAL_HOME": str(home), "PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": url,
            "PAL_DEFAULT_MODEL": "fake", "PAL_DEFAULT_STRUCTURED_MODE": "prompt", "PAL_DEFAULT_MAX_RETRIES": "10",
            "PAL_DEFAULT_TIMEOUT": "5", "PAL_EMBEDDER": "hash"}


def pal(env, *args, timeout=300):
    return subprocess.run([PAL, *args], capture_output=True, text=True, timeout=timeout, env=env)


def assert_every_utterance_once(env, runs: int):
    res = pal(env, "runs", "export", "--all", "--format", "jsonl")
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(records) == runs
    for rec in records:
        assert rec["status"] == "finished", rec["error"]
        slots = [(u["turn_no"], u["side"]) for u in rec["utterances"]]
        expected = [(t, s) for t in range(1, len(rec["schedule"]) + 1) for s in ("user", "assistant")]
        assert slots == expected  # each (turn, side) exactly once, in order


@pytest.fixture
def dataset(tmp_path):
    return make_release(tmp_path / "ds", users=2, sessions=3, logs_per_session=8, turns=8, query_sessions=1)


@pytest.mark.slow(seconds=75)  # mostly waiting: answers past the 5 s timeout, retries
def test_batch_completes_through_faults_and_lists_runs(tmp_path, dataset):
    with FaultServer(default=faulty(seed=7)).running() as server:
        env = env_for(tmp_path / "home", server.base_url)
        res = pal(env, "simulate", "--dataset", str(dataset), "--methods", "vanilla-log", "--concurrency", "3")
        assert res.returncode == 0, res.stderr
        summary = json.loads(res.stdout)
        assert (summary["runs"], summary["finished"], summary["failed"]) == (4, 4, 0)
        assert summary["llm_calls"] >= summary["utterances_written"] > 0
        assert res.stderr.count("] run-") == 4 and "[4/4] run-" in res.stderr
        assert_every_utterance_once(env, runs=4)
        listed = pal(env, "runs", "list", "--json")
        assert listed.returncode == 0 and {r["status"] for r in json.loads(listed.stdout)} == {"finished"}
        assert len(json.loads(listed.stdout)) == 4
        again = pal(env, "simulate", "--dataset", str(dataset), "--methods", "vanilla-log")
        assert again.returncode == 0 and json.loads(again.stdout)["skipped"] == 4
        take = pal(env, "simulate", "--dataset", str(dataset), "--methods", "vanilla-log", "--seed", "2")
        assert take.returncode == 0, take.stderr  # another take of the same topics, beside the stored runs
        assert (json.loads(take.stdout)["finished"], json.loads(take.stdout)["skipped"]) == (4, 0)
        runs = json.loads(pal(env, "runs", "list", "--json").stdout)
        assert sorted(r["seed"] for r in runs) == ["0"] * 4 + ["2"] * 4 and len({r["run_id"] for r in runs}) == 8
        assert pal(env, "runs", "list").stdout.count(" seed 2\n") == 4
        md = pal(env, "runs", "export", "--all", "--format", "md", "--out", str(tmp_path / "all.md"))
        assert md.returncode == 0 and (tmp_path / "all.md").read_text().count("# Simulation run-") == 8


def stored_turns(home) -> int:
    try:
        with sqlite3.connect(StatePaths(home).runs_db, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM sim_turns").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def _sigint_as_in_a_terminal() -> None:
    """Ctrl-C's default action in the child. A suite started in the background by a non-interactive shell
    (``make test &``) has SIGINT ignored from the start — the shell does that to background jobs, and Python then
    installs no handler — and the child, inheriting it, ran its batch to the end (exit 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_and_wait(args, env, home, turns: int) -> subprocess.Popen:
    """Start ``pal simulate`` and return once it has stored at least ``turns`` utterances."""
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_in_a_terminal)
    deadline = time.time() + 120
    while stored_turns(home) < turns and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    return proc


@pytest.mark.slow(seconds=50)
def test_interrupted_and_killed_batches_resume_to_complete_runs(tmp_path, dataset):
    home = tmp_path / "home"
    with FaultServer(default=faulty(seed=11, latency=0.1)).running() as server:
        env = env_for(home, server.base_url)
        args = [PAL, "simulate", "--dataset", str(dataset), "--methods", "vanilla-log", "--concurrency", "2"]
        proc = start_and_wait(args, env, home, turns=3)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: stops between utterances
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "run the same command again to resume" in err
        proc = start_and_wait(args, env, home, turns=stored_turns(home) + 4)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        killed_at = stored_turns(home)
        assert 7 <= killed_at < 40  # mid-way: the 4 runs have 40-56 utterances in all
        res = pal(env, *args[1:])
        assert res.returncode == 0, res.stderr
        summary = json.loads(res.stdout)
        assert summary["finished"] + summary["skipped"] == 4
        assert summary["utterances_written"] == stored_turns(home) - killed_at
        assert_every_utterance_once(env, runs=4)


def test_clear_errors(tmp_path, dataset):
    env = env_for(tmp_path / "home", "http://127.0.0.1:9/v1")
    res = pal(env, "simulate", "--dataset", str(dataset), "--methods", "nope")
    assert res.returncode == 2 and "unknown memory method 'nope'" in res.stderr
    res = pal(env, "simulate", "--dataset", str(dataset), "--methods", "vanilla-log", "--users", "9999")
    assert res.returncode == 2 and "no user '9999'" in res.stderr
    res = pal(env, "runs", "export", "run-nope")
    assert res.returncode == 2 and "no simulation run" in res.stderr
