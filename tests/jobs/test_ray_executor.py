"""The Ray executor's bookkeeping of a finished task: a unit whose node or worker died goes back to the queue (the
machine failed, not the unit); a unit's own error fails it; a result is applied and where it ran is kept."""

from __future__ import annotations

import types

import pytest

from jobs.ray_executor import RayExecutor
from jobs.types import JobSpec, UnitSpec
from testkit.workspace import make_workspace

exceptions = pytest.importorskip("ray.exceptions", reason="ray is an optional extra (make ray)")


class FakeRay:
    """What ``_collect`` asks of the ``ray`` module: its exception types and ``get`` of one task's outcome."""

    exceptions = exceptions

    def __init__(self, outcome):
        self.outcome = outcome

    def get(self, ref):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


@pytest.fixture
def claimed(tmp_path):
    ws = make_workspace(tmp_path / "pal")
    ws.jobs.store.submit(JobSpec(job_id="j", kind="t", title="t", pool="cli",
                                 units=[UnitSpec(key="a", kind="test.step")]))
    unit = ws.jobs.store.claim(ws.jobs.owner, 60)
    applied = []
    executor = RayExecutor(lambda u: (), lambda *a: (None, None), lambda u, records: applied.append(records))
    yield ws, unit, executor, applied
    ws.jobs.stop()


@pytest.mark.parametrize("lost", [exceptions.NodeDiedError("node gone"), exceptions.WorkerCrashedError()])
def test_a_unit_whose_node_or_worker_died_is_queued_again(claimed, lost):
    ws, unit, executor, applied = claimed
    executor._collect(FakeRay(lost), ws.jobs, "ref", unit, 1.0)
    again = ws.jobs.store.unit(unit.unit_id)
    assert again.status == "queued" and again.attempts == 0 and "lost" in again.last_error and applied == []
    assert ws.jobs.store.claim(ws.jobs.owner, 60).unit_id == unit.unit_id  # and runs again


def test_a_units_own_error_fails_it_and_a_result_is_applied_with_its_node(claimed):
    ws, unit, executor, applied = claimed
    executor._collect(FakeRay(ValueError("bad payload")), ws.jobs, "ref", unit, 1.0)
    assert ws.jobs.store.unit(unit.unit_id).status == "failed"
    ws.jobs.store.retry("j")
    unit = ws.jobs.store.claim(ws.jobs.owner, 60)
    executor._collect(FakeRay(("node-1", ({"ok": 1}, types.SimpleNamespace(rows={})))), ws.jobs, "ref", unit, 1.0)
    assert ws.jobs.store.unit(unit.unit_id).status == "done" and executor.placements == {unit.unit_id: "node-1"}
    assert len(applied) == 1


class FakeActor:
    """An actor handle: ``run.remote`` notes the unit it was sent."""

    def __init__(self, options):
        self.options, self.sent = options, []
        self.run = types.SimpleNamespace(remote=lambda fn, *args: self.sent.append(args) or f"ref-{len(self.sent)}")


class FakeActorClass:
    def __init__(self):
        self.made: list[FakeActor] = []

    def options(self, **options):
        return types.SimpleNamespace(remote=lambda: self.made.append(FakeActor(options)) or self.made[-1])


def test_units_share_a_pool_of_threaded_actors_each_one_cpu_of_units(claimed):
    """At a quarter CPU a unit, an actor runs four units at once and asks one CPU; the pool has the actors the
    job's concurrency needs, as many as the cluster's CPUs can place, and each unit goes to the least busy one."""
    ws, unit, _, _ = claimed
    executor = RayExecutor(lambda u: (), lambda *a: (None, None), lambda u, r: None, cpus_per_unit=0.25)
    executor._actor_class = actors = FakeActorClass()
    fake_ray = types.SimpleNamespace(cluster_resources=lambda: {"CPU": 3.0})
    executor._pool(fake_ray, concurrency=32)
    assert executor.units_per_actor == 4 and len(actors.made) == 3  # 8 wanted, 3 CPUs to place them on
    assert all(a.options == {"num_cpus": 1.0, "max_concurrency": 4, "scheduling_strategy": "SPREAD"}
               for a in actors.made)
    for i in range(6):
        executor._submit(fake_ray, unit, (i,), gpu=0)
    assert [len(a.sent) for a in actors.made] == [2, 2, 2]
