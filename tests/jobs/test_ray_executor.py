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


class Ref:
    def __init__(self, value):
        self.value = value


class LocalRay:
    """Enough of ``ray`` for a whole run: an actor runs each unit the moment it is sent, on the sender's thread."""

    exceptions = exceptions

    def __init__(self):
        self.killed = []

    def cluster_resources(self):
        return {"CPU": 2.0}

    def wait(self, refs, num_returns=1, timeout=None):
        return list(refs)[:num_returns], list(refs)[num_returns:]

    def get(self, ref):
        if isinstance(ref.value, BaseException):
            raise ref.value
        return ref.value

    def cancel(self, ref, force=False):
        pass

    def kill(self, actor):
        self.killed.append(actor)


class LocalActor:
    def __init__(self):
        self.warmed = 0
        self.run = types.SimpleNamespace(remote=lambda fn, *args: Ref(("node-1", fn(*args))))
        self.warm = types.SimpleNamespace(remote=self._warm)

    def _warm(self, fn):
        self.warmed += 1
        return Ref(fn())


class LocalActorClass:
    def __init__(self):
        self.made: list[LocalActor] = []

    def options(self, **options):
        return types.SimpleNamespace(remote=lambda: self.made.append(LocalActor()) or self.made[-1])


def local_executor(applied, fake_ray, warm=None):
    """An executor whose units run in this process: a unit's records are its id, applied in the order they end."""
    executor = RayExecutor(lambda u: (u.unit_id,), lambda uid: ({"ran": uid}, [uid]),
                           lambda u, records: applied.extend(records), cpus_per_unit=0.5, warm=warm)
    executor._actor_class = LocalActorClass()
    executor._task = object()
    executor.start = lambda: fake_ray
    return executor


def test_a_run_persists_every_unit_and_a_chains_next_unit_only_after_the_one_before(tmp_path):
    """Slot threads claim, send and persist units: every unit is done with its result, each applied once, and a
    unit that depends on another is sent only once the other's records are stored and it is done."""
    ws = make_workspace(tmp_path / "pal")
    chain = [UnitSpec(key="a", kind="test.step"), UnitSpec(key="b", kind="test.step", deps=["a"]),
             UnitSpec(key="c", kind="test.step", deps=["b"])]
    free = [UnitSpec(key=k, kind="test.step") for k in "defgh"]
    ws.jobs.store.submit(JobSpec(job_id="j", kind="t", title="t", pool="cli", units=chain + free))
    applied, warmed = [], []
    fake_ray = LocalRay()
    executor = local_executor(applied, fake_ray, warm=lambda: warmed.append(1))
    try:
        summary = ws.jobs.run("j", 4, executor=executor)
    finally:
        ws.jobs.stop()
    units = ws.jobs.store.units("j")
    assert summary.counts.get("done") == len(units) == 8
    assert all(u.result == {"ran": u.unit_id} for u in units)
    assert sorted(applied) == sorted(u.unit_id for u in units)  # each applied once
    order = [applied.index(f"j/{k}") for k in "abc"]
    assert order == sorted(order)
    assert set(executor.placements) == {u.unit_id for u in units}
    assert len(warmed) == len(executor._actor_class.made) >= 1  # each actor warmed once, before its units
    assert fake_ray.killed == executor._actor_class.made  # outside a Ray session nothing is kept: ended


def test_a_finished_runs_actors_serve_the_next_run_and_an_actor_stopped_mid_unit_is_ended(claimed):
    """What a worker loaded (imports, a template run store) is kept for the next run of this process: the next
    executor of the same shape takes over the actors, warming each again; an actor whose unit was cancelled may
    still be running it, so it is ended instead."""
    fake_ray = LocalRay()
    first = local_executor([], fake_ray, warm=lambda: None)
    first._shape = ("ray-job-1", 2, 1.0)
    first._pool(fake_ray, concurrency=4)
    kept, stopped = first._actor_class.made
    first._stopped = {1}
    first._hand_on(fake_ray)
    assert fake_ray.killed == [stopped]
    second = local_executor([], fake_ray, warm=lambda: None)
    second._shape = ("ray-job-1", 2, 1.0)
    second._pool(fake_ray, concurrency=4)
    assert second._actors[0] is kept and kept.warmed == 2  # taken over, warmed for this run too
    assert len(second._actor_class.made) == 1  # and one new actor for the rest
    other_session = local_executor([], fake_ray)
    other_session._shape = ("ray-job-2", 2, 1.0)
    other_session._pool(fake_ray, concurrency=2)
    assert other_session._actors[0] is not kept  # actors of an earlier Ray session are never reused
