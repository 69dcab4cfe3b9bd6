"""The job engine on a real run store: dependency order with users in parallel, failures and retries, cancel,
and leases — a worker killed mid-unit leaves its unit requeued, never "running"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from jobs.types import JobSpec, UnitSpec
from testkit.workspace import make_workspace
from tests.conftest import ROOT


@pytest.fixture
def ws(tmp_path):
    ws = make_workspace(tmp_path / "pal")
    yield ws
    ws.jobs.stop()


def chain_job(users: int, sessions: int, kind: str = "test.step") -> JobSpec:
    units = [UnitSpec(key=f"u{u}/s{s}", kind=kind, payload={"user": u, "session": s},
                      deps=[f"u{u}/s{s - 1}"] if s else []) for u in range(users) for s in range(sessions)]
    return JobSpec(job_id="job-chain", kind="test", title="chain", units=units, pool="cli")


def test_each_users_sessions_run_in_order_while_users_run_in_parallel(ws):
    spans: list[tuple[int, int, float, float]] = []
    lock = threading.Lock()

    def step(ctx):
        t0 = time.perf_counter()
        time.sleep(0.05)
        with lock:
            spans.append((ctx.payload["user"], ctx.payload["session"], t0, time.perf_counter()))
        return {"ok": True}

    ws.jobs.registry.register("test.step", step)
    summary = ws.jobs.run(ws.jobs.submit(chain_job(users=4, sessions=3)), concurrency=4)
    assert summary.status == "done" and summary.counts["done"] == 12
    for u in range(4):
        mine = sorted((s for s in spans if s[0] == u), key=lambda s: s[2])
        assert [s[1] for s in mine] == [0, 1, 2]
        assert all(a[3] <= b[2] for a, b in zip(mine, mine[1:]))  # session k+1 starts after k ended
    firsts = [s for s in spans if s[1] == 0]
    assert max(s[2] for s in firsts) < min(s[3] for s in firsts)  # the four users' first sessions overlapped
    assert all(u.result == {"ok": True} and u.attempts == 1 for u in ws.jobs.store.units("job-chain"))


def test_a_failed_unit_blocks_its_chain_and_a_retry_finishes_the_job(ws):
    broken = {"on": True}

    def step(ctx):
        if broken["on"] and ctx.payload == {"user": 0, "session": 1}:
            raise ValueError("endpoint said no")
        return None

    ws.jobs.registry.register("test.step", step)
    job = ws.jobs.submit(chain_job(users=2, sessions=4))
    summary = ws.jobs.run(job, concurrency=2)
    assert summary.status == "failed" and summary.counts["done"] == 5 and summary.counts["failed"] == 1
    assert summary.blocked == 2 and "endpoint said no" in summary.errors[0]  # u0/s2 and u0/s3, transitively
    failed = ws.jobs.store.units(job, status="failed")[0]
    assert failed.key == "u0/s1" and failed.last_error == "ValueError: endpoint said no"
    broken["on"] = False
    assert ws.jobs.retry(job) == 1
    summary = ws.jobs.run(job, concurrency=2)
    assert summary.status == "done" and ws.jobs.store.unit(failed.unit_id).attempts == 2


def test_cancel_stops_running_units_and_cancels_queued_ones(ws):
    started = threading.Event()

    def slow(ctx):
        started.set()
        while not ctx.cancel.wait(0.02):
            pass
        ctx.check()

    ws.jobs.registry.register("test.step", slow)
    job = ws.jobs.submit(chain_job(users=1, sessions=3))
    threading.Thread(target=lambda: (started.wait(10), ws.jobs.cancel(job)), daemon=True).start()
    summary = ws.jobs.run(job, concurrency=1)
    assert summary.status == "cancelled" and summary.counts["cancelled"] == 3 and summary.counts["done"] == 0
    ws.jobs.registry.register("test.step", lambda ctx: None)
    ws.jobs.submit(chain_job(users=1, sessions=3))  # submitting the same job again continues it
    assert ws.jobs.run(job).status == "done"


def test_app_workers_run_submitted_jobs_in_the_background(ws):
    ws.jobs.registry.register("test.step", lambda ctx: ctx.progress(1, 1, "half") or {"n": ctx.payload["session"]})
    ws.jobs.start(workers=2)
    job = ws.jobs.submit(chain_job(users=2, sessions=2).model_copy(update={"pool": "app"}))
    summary = ws.jobs.wait(job, timeout=20)
    assert summary.status == "done" and summary.progress == 1.0 and summary.eta(2) is None


class Env:
    """A job environment that says whether the engine asked for its unwatched form."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet

    def unwatched(self) -> Env:
        return Env(quiet=True)


def test_a_foreground_run_is_unwatched_and_app_workers_are_watched(ws):
    """A command's run has no page to show a unit's streamed text, so its units run in the environment's unwatched
    form (non-streamed LLM calls); the app's workers keep the environment as it is."""
    seen: dict[str, tuple[bool, bool]] = {}
    ws.jobs.registry.register("test.step", lambda ctx: seen.update({ctx.unit.unit_id: (ctx.watched, ctx.env.quiet)}))
    ws.jobs.run(ws.jobs.submit(chain_job(users=1, sessions=2), env=Env()))
    assert set(seen.values()) == {(False, True)} and len(seen) == 2
    seen.clear()
    ws.jobs.start(workers=2)
    job = ws.jobs.submit(chain_job(users=1, sessions=2).model_copy(update={"job_id": "job-app", "pool": "app"}),
                         env=Env())
    assert ws.jobs.wait(job, timeout=20).status == "done"
    assert set(seen.values()) == {(True, False)} and len(seen) == 2


def test_a_unit_that_ends_wakes_one_idle_worker_not_all(ws):
    """Many workers on a chain (one unit ready at a time): each end wakes one idle worker to claim the next unit,
    instead of every idle worker claiming at once for the one that became ready."""
    claims = []
    claim = ws.jobs.store.claim

    def counted(*args, **kwargs):
        unit = claim(*args, **kwargs)
        claims.append(unit is not None)
        return unit

    ws.jobs.store.claim = counted  # type: ignore[method-assign]  # counts the claims the workers make
    ws.jobs.registry.register("test.step", lambda ctx: time.sleep(0.01))
    summary = ws.jobs.run(ws.jobs.submit(chain_job(users=1, sessions=20)), concurrency=16)
    assert summary.counts["done"] == 20 and sum(claims) == 20
    assert len(claims) < 8 * 20  # 16 workers woken by each of 20 ends would claim over 300 times


BLOCKING_WORKER = """
import sys, time, pathlib
from jobs.types import JobSpec, UnitSpec
from testkit.workspace import make_workspace
home, marker = sys.argv[1], pathlib.Path(sys.argv[2])
ws = make_workspace(pathlib.Path(home))
def block(ctx):
    marker.write_text(ctx.unit.unit_id)
    time.sleep(120)
ws.jobs.registry.register("test.block", block)
ws.jobs.run(ws.jobs.submit(JobSpec(job_id="job-kill", kind="test", title="kill", pool="cli",
                                   units=[UnitSpec(key="one", kind="test.block")])))
"""


def test_a_worker_killed_mid_unit_leaves_the_unit_requeued_not_running(tmp_path):
    home, marker = tmp_path / "pal", tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", BLOCKING_WORKER, str(home), str(marker)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "the worker never started its unit"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)

    ws = make_workspace(home)  # the app (or the command) starts again on this host
    unit = ws.jobs.store.unit("job-kill/one")
    assert unit.status == "running" and unit.lease_owner.endswith(f":{proc.pid}:" + unit.lease_owner.split(":")[2])
    assert ws.jobs.recover() == 1
    unit = ws.jobs.store.unit("job-kill/one")
    assert unit.status == "queued" and unit.lease_owner is None and unit.last_error == "its worker died"
    ws.jobs.registry.register("test.block", lambda ctx: {"second": True})
    assert ws.jobs.run("job-kill").status == "done"
    assert ws.jobs.store.unit("job-kill/one").result == {"second": True}


def test_a_lease_that_expires_requeues_the_unit(ws):
    ws.jobs.submit(JobSpec(job_id="job-lease", kind="test", title="lease", pool="cli",
                           units=[UnitSpec(key="one", kind="memory.session")]))
    unit = ws.jobs.store.claim("elsewhere:1:abc", lease_s=0.2, job_id="job-lease")  # a worker on another host
    assert unit is not None and ws.jobs.store.unit(unit.unit_id).status == "running"
    assert ws.jobs.recover() == 0  # alive as far as this host can tell, lease still valid
    time.sleep(0.3)
    assert ws.jobs.store.requeue_expired() == 1 and ws.jobs.store.unit(unit.unit_id).status == "queued"
    assert not ws.jobs.store.finish(unit.unit_id, "elsewhere:1:abc", None, 1.0)  # a late finish is refused


def test_jobs_by_id_prefix_lists_only_those_jobs(ws):
    for job_id in ("memory-b1-x", "memory-b1-y", "memory-b2-x", "sim-b1-x", "memory_b1-z"):
        ws.jobs.submit(chain_job(users=1, sessions=1, kind="eval.judge").model_copy(update={"job_id": job_id}))  # never run
    assert {j.job_id for j in ws.jobs.store.jobs(prefix="memory-b1-")} == {"memory-b1-x", "memory-b1-y"}
    assert {j.job_id for j in ws.jobs.store.jobs(prefix="memory-b1-", kind="other")} == set()
    assert len(ws.jobs.store.jobs()) == 5


def test_a_foreground_run_reads_its_jobs_summary_about_once_a_second_not_at_every_unit_end(ws, monkeypatch):
    """A summary counts over all of a job's units; read at every unit end, it made each unit's cost grow with the
    job. It is read once every ``every`` seconds while units run here, and at once when none does (the end)."""
    ws.jobs.registry.register("test.step", lambda ctx: time.sleep(0.01) or {"ok": True})
    reads = []
    summary = ws.jobs.store.summary
    monkeypatch.setattr(ws.jobs.store, "summary", lambda job_id: reads.append(time.monotonic()) or summary(job_id))
    started = time.monotonic()
    result = ws.jobs.run(ws.jobs.submit(chain_job(users=8, sessions=25)), concurrency=8, every=0.5)
    took = time.monotonic() - started
    assert result.status == "done" and result.counts["done"] == 200
    # 200 unit ends; reads once every 0.5 s, and when no unit happens to run here (between two of a chain's units)
    assert len(reads) <= 2 * took / 0.5 + 50, (len(reads), took)
    assert time.monotonic() - reads[-2] < 0.5  # the end was seen at once, not at the next second


def test_a_units_calls_wait_with_its_height_so_the_critical_path_goes_first(ws):
    """Units share an endpoint of one slot. Three units nothing waits on queue for it first; then the first unit of a
    chain of three asks: when the slot is given back it goes before them, as everything after it waits on it."""
    from backends.config import EndpointLimits
    from backends.llm.limits import Limiters, current_priority

    lim = Limiters({"http://e/v1": EndpointLimits(concurrency=1)}).limiter("http://e/v1")
    held = lim.acquire(1)  # busy until every unit below waits
    lows_waiting = threading.Event()
    order: list[tuple[str, int]] = []

    def step(ctx):
        if ctx.unit.key == "chain/0":
            assert lows_waiting.wait(10)
        entry = lim.acquire(1)
        order.append((ctx.unit.key, current_priority()))
        lim.release(entry, None, rate_limited=False, retry_after=None)
        return {"key": ctx.unit.key}

    units = [UnitSpec(key=f"low/{i}", kind="test.step") for i in range(3)]
    units += [UnitSpec(key=f"chain/{s}", kind="test.step", deps=[f"chain/{s - 1}"] if s else []) for s in range(3)]
    ws.jobs.registry.register("test.step", step)
    job = ws.jobs.submit(JobSpec(job_id="job-prio", kind="test", title="prio", units=units, pool="cli"))
    assert ws.jobs.store.heights(job) == {f"job-prio/low/{i}": 0 for i in range(3)} | {
        "job-prio/chain/0": 2, "job-prio/chain/1": 1, "job-prio/chain/2": 0}

    def release_when_all_wait():
        deadline = time.monotonic() + 10
        while lim.waiting < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        lows_waiting.set()
        while lim.waiting < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        lim.release(held, None, rate_limited=False, retry_after=None)

    threading.Thread(target=release_when_all_wait, daemon=True).start()
    summary = ws.jobs.run(job, concurrency=4)
    assert summary.status == "done"
    assert order[0] == ("chain/0", 2)  # queued last, admitted first
    assert dict(order) == {"low/0": 0, "low/1": 0, "low/2": 0, "chain/0": 2, "chain/1": 1, "chain/2": 0}
    assert {u.key: u.result for u in ws.jobs.store.units(job)} == {k: {"key": k} for k, _ in order}
