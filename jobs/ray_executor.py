"""Run a job's units as Ray tasks: the driver claims units under its lease, ships each with the records it reads,
and persists what the task returns — workers need no shared database, only the code and the dataset files.

``ray`` is an optional dependency (``requirements-ray.txt``, ``make ray``); it is imported when the executor
starts. The composition root supplies the three pieces that know the domains: ``prepare(unit)`` (the arguments
of the remote call, records included), ``remote`` (a module-level function run on the worker, returning
``(result, records)``) and ``apply(unit, records)`` (persist them on the driver). A unit whose kind wants a GPU
asks Ray for one when the cluster has any.

A unit mostly waits on LLM endpoints, so it asks Ray for a fraction of a CPU (``cpus_per_unit``): a node runs
several at once, and the job's concurrency bounds how many are in flight. They run on a pool of threaded actors,
``1 / cpus_per_unit`` units at once in each (an actor asks one CPU's worth), spread over the cluster's nodes
(``SPREAD``): a worker process imports the app and opens its embedders, datasets and connections once for the
many units it runs, where one process per task paid that for each of dozens of processes at once. Where each unit
ran is kept (``placements``); a unit that wants a GPU runs as a task of its own. The cluster is the one at ``address``, else at
``RAY_ADDRESS``, else a Ray started in this process. A unit whose node or worker process died is given back to
the queue (run again, by this run or the next), not failed: only the unit's own error fails it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jobs.types import JobSummary, Unit

if TYPE_CHECKING:
    from jobs.engine import JobEngine

log = logging.getLogger(__name__)


class RayExecutor:
    """``--executor ray [--address …]``: one Ray task per unit, at most ``concurrency`` in flight."""

    def __init__(self, prepare: Callable[[Unit], tuple], remote: Callable[..., tuple[dict | None, Any]],
                 apply: Callable[[Unit, Any], None], address: str | None = None, num_cpus: int | None = None,
                 runtime_env: dict | None = None, cpus_per_unit: float = 1.0):
        """``cpus_per_unit``: the CPU share a unit asks Ray for — units mostly wait on LLM endpoints, so a node
        runs several at once; the job's ``concurrency`` bounds how many are in flight. GPU units ask one CPU."""
        self.prepare, self.remote_fn, self.apply = prepare, remote, apply
        self.cpus_per_unit = cpus_per_unit
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.num_cpus, self.runtime_env = num_cpus, runtime_env
        self._task: Any = None
        self._actor_class: Any = None
        self._actors: list[Any] = []  # the pool (see the module docstring); None where an actor died
        self._load: dict[int, int] = {}  # actor index → units in flight on it
        self.gpus = 0.0
        self.placements: dict[str, str] = {}  # unit id → the id of the Ray node it ran on

    def start(self) -> Any:
        """Connect to (or start) Ray — from the main thread, where Ray can install its signal handlers."""
        import ray

        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address:
                kwargs["address"] = self.address
            elif self.num_cpus:
                kwargs["num_cpus"] = self.num_cpus
            if self.runtime_env:
                kwargs["runtime_env"] = self.runtime_env
            ray.init(**kwargs)
        self.gpus = float(ray.cluster_resources().get("GPU", 0))
        if self._task is None:
            self._task = ray.remote(max_retries=0)(_on_node)
            self._actor_class = ray.remote(max_restarts=0, max_task_retries=0)(UnitActor)
        return ray

    @property
    def units_per_actor(self) -> int:
        """Units one actor runs at once: one CPU's worth at ``cpus_per_unit`` each."""
        return max(1, round(1 / self.cpus_per_unit)) if self.cpus_per_unit > 0 else 1

    def _pool(self, ray: Any, concurrency: int) -> None:
        """Start the actors ``concurrency`` units need (as many as the cluster's CPUs can place, at least one)."""
        per = self.units_per_actor
        cpus = per * self.cpus_per_unit
        room = int(float(ray.cluster_resources().get("CPU", 0)) // cpus) if cpus > 0 else concurrency
        wanted = max(1, min(-(-concurrency // per), room or 1))
        while len(self._actors) < wanted:
            self._actors.append(self._actor_class.options(num_cpus=cpus, max_concurrency=per,
                                                          scheduling_strategy="SPREAD").remote())
            self._load[len(self._actors) - 1] = 0

    def _submit(self, ray: Any, unit: Unit, args: tuple, gpu: int) -> tuple[Any, int | None]:
        """Send one unit: to the least busy live actor, or (wanting a GPU) as a task of its own."""
        if gpu:
            return self._task.options(num_gpus=gpu, num_cpus=1, scheduling_strategy="SPREAD").remote(
                self.remote_fn, *args), None
        live = [i for i, a in enumerate(self._actors) if a is not None]
        if not live:  # every actor died: start a fresh one
            self._actors.append(self._actor_class.options(
                num_cpus=self.units_per_actor * self.cpus_per_unit, max_concurrency=self.units_per_actor,
                scheduling_strategy="SPREAD").remote())
            live = [len(self._actors) - 1]
            self._load[live[0]] = 0
        index = min(live, key=lambda i: self._load[i])
        self._load[index] += 1
        return self._actors[index].run.remote(self.remote_fn, *args), index

    def run(self, engine: JobEngine, job_id: str, concurrency: int,
            on_progress: Callable[[JobSummary], None] | None, stop: threading.Event) -> None:
        ray = self.start()
        self._pool(ray, concurrency)
        in_flight: dict[Any, tuple[Unit, float, int | None]] = {}
        try:
            self._dispatch(ray, engine, job_id, concurrency, stop, in_flight)
        finally:
            for ref, (unit, _, actor) in in_flight.items():  # stopped: cancel the tasks, the units go back to the queue
                ray.cancel(ref, force=actor is None)  # (an actor's task cannot be forced; the actor is ended below)
                engine.store.release(unit.unit_id, engine.owner)
            for actor in self._actors:  # their processes end: the next run starts a pool of its own
                if actor is not None:
                    ray.kill(actor)
            self._actors, self._load = [], {}

    def _dispatch(self, ray: Any, engine: JobEngine, job_id: str, concurrency: int, stop: threading.Event,
                  in_flight: dict[Any, tuple[Unit, float, int | None]]) -> None:
        """Keep ``concurrency`` units in flight and persist each as it ends, until the job is finished or stopped."""
        while not stop.is_set():
            while len(in_flight) < concurrency and not stop.is_set():
                unit = engine.store.claim(engine.owner, engine.lease_s, job_id=job_id)
                if unit is None:
                    break
                try:
                    args = self.prepare(unit)
                except Exception as e:  # the driver could not gather the unit's records: the unit fails
                    log.exception("unit %s: preparing its records failed", unit.unit_id)
                    engine.store.fail(unit.unit_id, engine.owner, f"{type(e).__name__}: {e}", 0.0)
                    continue
                gpu = 1 if self.gpus and engine.registry.get(unit.kind).wants_gpu(unit.payload) else 0
                ref, actor = self._submit(ray, unit, args, gpu)
                in_flight[ref] = (unit, time.perf_counter(), actor)
            if not in_flight:
                if engine.store.summary(job_id).finished:
                    return
                stop.wait(engine.poll_s)
                continue
            refs = list(in_flight)
            ready, rest = ray.wait(refs, num_returns=1, timeout=engine.poll_s)
            if ready and rest:  # every unit that has ended by now, not one per turn
                ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
            for ref in ready:
                unit, started, actor = in_flight.pop(ref)
                if actor is not None:
                    self._load[actor] -= 1
                if not self._collect(ray, engine, ref, unit, time.perf_counter() - started) and actor is not None:
                    self._actors[actor] = None  # its process or node is gone: later units go to the others
            engine.notify()

    def _collect(self, ray: Any, engine: JobEngine, ref: Any, unit: Unit, seconds: float) -> bool:
        """Persist a finished unit's outcome; False when the machine it ran on was lost (the unit is queued again)."""
        try:
            node, (result, records) = ray.get(ref)
            self.placements[unit.unit_id] = node
            self.apply(unit, records)
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError,
                ray.exceptions.TaskUnschedulableError, ray.exceptions.RayActorError) as e:  # the machine: again
            log.warning("unit %s: its Ray worker or node was lost (%s); queued again", unit.unit_id, e)
            engine.store.release(unit.unit_id, engine.owner, error=f"its Ray node or worker was lost: {e}"[:2000])
            return False
        except Exception as e:  # a task's failure (or its records' persistence) fails the unit, not the driver
            log.exception("unit %s failed on Ray", unit.unit_id)
            cause = getattr(e, "cause", None) or e
            engine.store.fail(unit.unit_id, engine.owner, f"{type(cause).__name__}: {cause}"[:2000], seconds)
            return True
        engine.store.finish(unit.unit_id, engine.owner, result, seconds)
        return True


class UnitActor:
    """A worker process that runs several units at once on threads (``max_concurrency``), keeping what it loaded."""

    def run(self, fn: Callable[..., tuple[dict | None, Any]], *args: Any) -> tuple[str, tuple[dict | None, Any]]:
        return _on_node(fn, *args)


def _on_node(fn: Callable[..., tuple[dict | None, Any]], *args: Any) -> tuple[str, tuple[dict | None, Any]]:
    """On the worker: (the id of the node it runs on, ``fn(*args)``)."""
    import ray

    return ray.get_runtime_context().get_node_id(), fn(*args)
