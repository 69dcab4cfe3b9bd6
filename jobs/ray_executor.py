"""Run a job's units as Ray tasks: the driver claims units under its lease, ships each with the records it reads,
and persists what the task returns — workers need no shared database, only the code and the dataset files.

``ray`` is an optional dependency (``requirements-ray.txt``, ``make ray``); it is imported when the executor
starts. The composition root supplies the three pieces that know the domains: ``prepare(unit)`` (the arguments
of the remote call, records included), ``remote`` (a module-level function run on the worker, returning
``(result, records)``) and ``apply(unit, records)`` (persist them on the driver). A unit whose kind wants a GPU
asks Ray for one when the cluster has any.

A unit mostly waits on LLM endpoints, so it asks Ray for a fraction of a CPU (``cpus_per_unit``): a node runs
several at once, and the job's concurrency bounds how many are in flight. Units are spread over the cluster's
nodes (``SPREAD``), and where each ran is kept (``placements``). The cluster is the one at ``address``, else at
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
        return ray

    def run(self, engine: JobEngine, job_id: str, concurrency: int,
            on_progress: Callable[[JobSummary], None] | None, stop: threading.Event) -> None:
        ray = self.start()
        in_flight: dict[Any, tuple[Unit, float]] = {}
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
                ref = self._task.options(num_gpus=gpu, num_cpus=1 if gpu else self.cpus_per_unit,
                                         scheduling_strategy="SPREAD").remote(self.remote_fn, *args)
                in_flight[ref] = (unit, time.perf_counter())
            if not in_flight:
                if engine.store.summary(job_id).finished:
                    return
                stop.wait(engine.poll_s)
                continue
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=engine.poll_s)
            for ref in ready:
                unit, started = in_flight.pop(ref)
                self._collect(ray, engine, ref, unit, time.perf_counter() - started)
            engine.notify()
        for ref, (unit, _) in in_flight.items():  # stopped: cancel the tasks, the units go back to the queue
            ray.cancel(ref, force=True)
            engine.store.release(unit.unit_id, engine.owner)

    def _collect(self, ray: Any, engine: JobEngine, ref: Any, unit: Unit, seconds: float) -> None:
        try:
            node, (result, records) = ray.get(ref)
            self.placements[unit.unit_id] = node
            self.apply(unit, records)
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError,
                ray.exceptions.TaskUnschedulableError) as e:  # the machine, not the unit: run it again
            log.warning("unit %s: its Ray worker or node was lost (%s); queued again", unit.unit_id, e)
            engine.store.release(unit.unit_id, engine.owner, error=f"its Ray node or worker was lost: {e}"[:2000])
            return
        except Exception as e:  # a task's failure (or its records' persistence) fails the unit, not the driver
            log.exception("unit %s failed on Ray", unit.unit_id)
            cause = getattr(e, "cause", None) or e
            engine.store.fail(unit.unit_id, engine.owner, f"{type(cause).__name__}: {cause}"[:2000], seconds)
            return
        engine.store.finish(unit.unit_id, engine.owner, result, seconds)


def _on_node(fn: Callable[..., tuple[dict | None, Any]], *args: Any) -> tuple[str, tuple[dict | None, Any]]:
    """On the worker: (the id of the node it runs on, ``fn(*args)``)."""
    import ray

    return ray.get_runtime_context().get_node_id(), fn(*args)
