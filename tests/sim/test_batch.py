"""The batch runner with a scripted LLM: every planned run finishes, re-runs skip them, failed runs resume exactly."""

import threading

import pytest

from backends.llm.errors import BadRequest
from palset.loader import load_dataset
from sim.batch import plan_runs, run_batch
from testkit.release import make_release
from tests.sim.conftest import default_reply


@pytest.fixture
def filler(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_EMBEDDER", "hash")  # vanilla-log embeds nothing: skip loading a real model
    root = make_release(tmp_path / "ds", users=2, sessions=3, logs_per_session=8, turns=8, query_sessions=1)
    return load_dataset(root)


def assert_complete(store, specs):
    """Every run finished, with each (turn, side) of its schedule present exactly once."""
    for rec in (store.load(r["run_id"]) for r in store.list()):
        assert rec.status == "finished", (rec.run_id, rec.error)
        slots = [(u.turn_no, u.side) for u in rec.utterances]
        expected = [(t, s) for t in range(1, len(rec.schedule) + 1) for s in ("user", "assistant")]
        assert sorted(slots) == sorted(expected) and len(set(slots)) == len(slots)
    assert len(store.list()) == len(specs)


def test_plan_covers_every_query_topic_and_rejects_unknowns(filler):
    specs = plan_runs(filler, ["vanilla-log", "vanilla"])
    assert len(specs) == 2 * 1 * 2 * 2  # users × query sessions × topics × methods
    assert {s.mode for s in specs} == {"fixed"} and {s.seed for s in specs} == {"0"}
    assert all(filler.users[s.user_id].session(s.sample_id).split == "query" for s in specs)
    assert len(plan_runs(filler, ["vanilla-log"], users=["0001"], topics="all")) == 3 * 2
    with pytest.raises(ValueError, match="unknown memory method"):
        plan_runs(filler, ["nope"])
    with pytest.raises(ValueError, match="no user"):
        plan_runs(filler, ["vanilla-log"], users=["9999"])


def test_batch_finishes_every_run_and_rerun_skips_them(filler, sim_env):
    make_llm, store = sim_env
    specs = plan_runs(filler, ["vanilla-log"])
    seen = []
    summary = run_batch(make_llm.ws, filler, specs, lambda: make_llm()[0], concurrency=3,
                        progress=lambda k, n, o: seen.append((k, n, o.status)))
    assert (summary.runs, summary.finished, summary.failed) == (4, 4, 0)
    assert [k for k, _, _ in seen] == [1, 2, 3, 4] and {s for *_, s in seen} == {"finished"}
    assert summary.utterances_written == sum(len(r.utterances) for r in map(store.load, (x["run_id"] for x in store.list())))
    assert summary.llm_calls == summary.utterances_written  # vanilla-log: one call per utterance, no summary
    assert summary.tokens_in > 0 and summary.wall_seconds > 0
    assert_complete(store, specs)
    again = run_batch(make_llm.ws, filler, specs, lambda: make_llm()[0], concurrency=2)
    assert (again.skipped, again.utterances_written, again.llm_calls) == (4, 0, 0)


def test_failed_runs_are_completed_on_rerun_without_duplicates(filler, sim_env):
    make_llm, store = sim_env
    specs = plan_runs(filler, ["vanilla-log"])
    calls, lock = [0], threading.Lock()

    def failing(req):
        with lock:
            calls[0] += 1
            n = calls[0]
        if n > 16:  # the first run (10-14 utterances) finishes, the second fails mid-way
            raise BadRequest("scripted failure")
        return default_reply(req)

    first = run_batch(make_llm.ws, filler, specs, lambda: make_llm(failing)[0], concurrency=1)
    assert first.finished == 1 and first.failed == 3
    assert all("scripted failure" in e for e in first.errors.values())
    before = {r["run_id"]: r["utterances"] for r in store.list()}
    assert sum(before.values()) == first.utterances_written == 16
    second = run_batch(make_llm.ws, filler, specs, lambda: make_llm()[0], concurrency=2)
    assert (second.finished, second.skipped, second.failed) == (first.failed, first.finished, 0)
    after = {r["run_id"]: r["utterances"] for r in store.list()}
    assert second.utterances_written == sum(after.values()) - sum(before.values())
    assert_complete(store, specs)


def test_cancel_leaves_runs_resumable(filler, sim_env):
    make_llm, store = sim_env
    specs = plan_runs(filler, ["vanilla-log"])
    cancel = threading.Event()

    def cancelling(req):
        cancel.set()  # the first utterance is the last one this batch writes
        return default_reply(req)

    first = run_batch(make_llm.ws, filler, specs, lambda: make_llm(cancelling)[0], concurrency=1, cancel=cancel)
    assert first.cancelled == 4 and first.utterances_written == 1 and first.failed == 0
    second = run_batch(make_llm.ws, filler, specs, lambda: make_llm()[0], concurrency=2)
    assert second.finished == 4
    assert_complete(store, specs)
