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

On the driver, the job's ``concurrency`` is a set of slot threads, each claiming a unit, sending it and waiting
for it — as the thread executor's workers do with the unit's body run remotely — then handing what it returned to
a thread that persists it (``apply``: rows, files, the driver's vector index; then the unit is done) while the
slot claims its next unit. Persisting one unit never holds up the dispatch of the others, and a unit that
depends on another is claimed once the other is stored. ``warm`` (optional) is called in each actor before the
run's first unit: it loads what every unit needs (the app's modules, a scratch run store to copy) and resets
what a run keeps there; :meth:`RayExecutor.warm_up` waits for it. After a run its actors stay for the next run of
the same driver process (their processes keep what they imported), ending with the driver's Ray session; an
actor whose unit was cancelled mid-run is ended.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobs.types import JobSummary, Unit

if TYPE_CHECKING:
    from jobs.engine import JobEngine

log = logging.getLogger(__name__)

_IDLE: dict[tuple, list[Any]] = {}  # actors a finished run left running, by (Ray job, units per actor, CPUs per actor)
_IDLE_LOCK = threading.Lock()

IDLE_POLL_S = 2.0  # the longest an idle slot waits before it looks for units again (units of other processes)


@dataclass
class _Run:
    """One run's state shared by the driver's slot threads: the engine's ``stop``, a counter of units ended (the
    idle slots wait on it) and the threads that persist ended units."""

    engine: JobEngine
    job_id: str
    stop: threading.Event
    persist: ThreadPoolExecutor
    changed: threading.Condition = field(default_factory=threading.Condition)
    events: int = 0

    def signal(self) -> None:
        """A unit ended or was claimed: one idle slot looks for a unit."""
        with self.changed:
            self.events += 1
            self.changed.notify()

    def wait(self, seen: int, timeout: float) -> None:
        """Until an event after ``seen``, ``stop`` (looked at every ``poll_s``) or ``timeout``."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while self.events == seen and not self.stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.changed.wait(min(left, self.engine.poll_s))


class RayExecutor:
    """``--executor ray [--address …]``: one Ray task per unit, at most ``concurrency`` in flight."""

    def __init__(self, prepare: Callable[[Unit], tuple], remote: Callable[..., tuple[dict | None, Any]],
                 apply: Callable[[Unit, Any], None], address: str | None = None, num_cpus: int | None = None,
                 runtime_env: dict | None = None, cpus_per_unit: float = 1.0, warm: Callable[[], Any] | None = None):
        """``cpus_per_unit``: the CPU share a unit asks Ray for — units mostly wait on LLM endpoints, so a node
        runs several at once; the job's ``concurrency`` bounds how many are in flight. GPU units ask one CPU.
        ``warm``: a picklable call each actor makes once as it starts (see the module docstring)."""
        self.prepare, self.remote_fn, self.apply, self.warm = prepare, remote, apply, warm
        self.cpus_per_unit = cpus_per_unit
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.num_cpus, self.runtime_env = num_cpus, runtime_env
        self._task: Any = None
        self._actor_class: Any = None
        self._actors: list[Any] = []  # the pool (see the module docstring); None where an actor died
        self._load: dict[int, int] = {}  # actor index → units in flight on it
        self._warming: list[Any] = []  # refs of the warm calls of the actors started, not yet waited for
        self._stopped: set[int] = set()  # actors whose unit was cancelled mid-run: ended, never handed on
        self._shape: tuple | None = None  # the key of this executor's actors in _IDLE (set when Ray starts)
        self._lock = threading.Lock()  # the pool and its load: the driver's slot threads share them
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
        self._shape = (ray.get_runtime_context().get_job_id(), self.units_per_actor,
                       self.units_per_actor * self.cpus_per_unit)
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
        with self._lock:
            while len(self._actors) < wanted:
                self._start_actor(self._adopt())

    def _adopt(self) -> Any:
        """An actor of this shape that an earlier run of this process left running, or None."""
        with _IDLE_LOCK:
            for key in [k for k in _IDLE if self._shape is None or k[0] != self._shape[0]]:
                del _IDLE[key]  # actors of an earlier Ray session: gone with it
            idle = _IDLE.get(self._shape) if self._shape is not None else None
            return idle.pop() if idle else None

    def _start_actor(self, actor: Any = None) -> int:
        """One more actor in the pool (the caller holds ``_lock``): ``actor``, or a new one; its warm call is
        sent at once and waited for before any unit (:meth:`warm_up`)."""
        if actor is None:
            actor = self._actor_class.options(num_cpus=self.units_per_actor * self.cpus_per_unit,
                                              max_concurrency=self.units_per_actor,
                                              scheduling_strategy="SPREAD").remote()
        self._actors.append(actor)
        index = len(self._actors) - 1
        self._load[index] = 0
        if self.warm is not None:
            self._warming.append(actor.warm.remote(self.warm))
        return index

    def warm_up(self, concurrency: int) -> float:
        """Start the pool ``concurrency`` units need (taking over actors an earlier run of this process left)
        and wait until every actor has made its warm call; returns the seconds it took. Every run does it
        first; a bench calls it beforehand to time the fixed start-up apart from the run."""
        started = time.perf_counter()
        ray = self.start()
        self._pool(ray, concurrency)
        with self._lock:
            refs, self._warming = self._warming, []
        for ref in refs:
            try:
                ray.get(ref)
            except Exception:  # the actor cannot warm up: its units will say why when they fail
                log.exception("a Ray worker's warm-up failed")
        return time.perf_counter() - started

    def _submit(self, ray: Any, unit: Unit, args: tuple, gpu: int) -> tuple[Any, int | None]:
        """Send one unit: to the least busy live actor, or (wanting a GPU) as a task of its own."""
        if gpu:
            return self._task.options(num_gpus=gpu, num_cpus=1, scheduling_strategy="SPREAD").remote(
                self.remote_fn, *args), None
        with self._lock:
            live = [i for i, a in enumerate(self._actors) if a is not None]
            if not live:  # every actor died: start a fresh one
                live = [self._start_actor()]
            index = min(live, key=lambda i: self._load[i])
            self._load[index] += 1
            actor = self._actors[index]
        return actor.run.remote(self.remote_fn, *args), index

    def run(self, engine: JobEngine, job_id: str, concurrency: int,
            on_progress: Callable[[JobSummary], None] | None, stop: threading.Event) -> None:
        """Run the job's units on ``concurrency`` slot threads (see the module docstring) until ``stop``."""
        ray = self.start()
        self.warm_up(concurrency)  # units never overtake an actor's warm call (it resets what a run keeps there)
        run = _Run(engine, job_id, stop, ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="ray-persist"))
        slots = [threading.Thread(target=self._slot, args=(ray, run), name=f"ray-slot-{i}", daemon=True)
                 for i in range(max(1, concurrency))]
        try:
            for t in slots:
                t.start()
            for t in slots:
                t.join()
        finally:
            stop.set()
            for t in slots:
                t.join()
            run.persist.shutdown(wait=True)  # units that ended remotely are stored, whatever stopped the run
            self._hand_on(ray)

    def _hand_on(self, ray: Any) -> None:
        """After a run: its live actors stay for the next run of this process (what they loaded with them);
        one whose unit was cancelled mid-run may still be running it, so it is ended. The actors end with the
        driver's Ray session (``ray.shutdown()`` or the process's end)."""
        with self._lock:
            actors, stopped = self._actors, self._stopped
            self._actors, self._load, self._warming, self._stopped = [], {}, [], set()
        kept = [a for i, a in enumerate(actors) if a is not None and i not in stopped]
        for i in stopped:
            if actors[i] is not None:
                ray.kill(actors[i])
        if self._shape is None:
            for actor in kept:
                ray.kill(actor)
            return
        with _IDLE_LOCK:
            _IDLE.setdefault(self._shape, []).extend(kept)

    def _slot(self, ray: Any, run: _Run) -> None:
        """One slot of the run: claim a unit, run it remotely, hand it to be persisted, claim the next; until
        ``stop`` (set by the engine's foreground run once the job has finished). With nothing to claim it waits
        until a unit is persisted (which may have made one ready), looking again less and less often for units of
        other processes."""
        engine, idle = run.engine, run.engine.poll_s
        while not run.stop.is_set():
            seen = run.events
            try:
                unit = engine.store.claim(engine.owner, engine.lease_s, job_id=run.job_id)
            except Exception:  # e.g. the database busy beyond its timeout: try again shortly
                log.exception("job %s: claiming a unit for Ray failed", run.job_id)
                unit = None
            if unit is None:
                run.wait(seen, idle)
                idle = min(2 * idle, max(engine.poll_s, IDLE_POLL_S))
                continue
            idle = engine.poll_s
            run.signal()  # another unit may be ready too: an idle slot looks
            try:
                self._run_unit(ray, run, unit)
            except Exception:  # the store failed under the slot: its lease expires and the unit is queued again
                log.exception("unit %s: its Ray slot failed; the unit is requeued when its lease expires", unit.unit_id)

    def _run_unit(self, ray: Any, run: _Run, unit: Unit) -> None:
        """Gather the unit's records, send it, wait for it (or give it back when stopped), and hand its outcome
        to be persisted — on another thread, so the slot's next unit is on its way meanwhile."""
        engine = run.engine
        try:
            args = self.prepare(unit)
        except Exception as e:  # the driver could not gather the unit's records: the unit fails
            log.exception("unit %s: preparing its records failed", unit.unit_id)
            engine.store.fail(unit.unit_id, engine.owner, f"{type(e).__name__}: {e}", 0.0)
            run.signal()
            return
        gpu = 1 if self.gpus and engine.registry.get(unit.kind).wants_gpu(unit.payload) else 0
        started = time.perf_counter()
        ref, actor = self._submit(ray, unit, args, gpu)
        try:
            while not ray.wait([ref], num_returns=1, timeout=engine.poll_s)[0]:
                if run.stop.is_set():  # stopped: the task is cancelled, the unit goes back to the queue
                    ray.cancel(ref, force=actor is None)  # (an actor's task cannot be forced; run ends the actor)
                    engine.store.release(unit.unit_id, engine.owner)
                    if actor is not None:
                        with self._lock:
                            self._stopped.add(actor)
                    return
        finally:
            if actor is not None:
                with self._lock:
                    self._load[actor] = self._load.get(actor, 1) - 1
        run.persist.submit(self._persist, ray, run, ref, unit, time.perf_counter() - started, actor)

    def _persist(self, ray: Any, run: _Run, ref: Any, unit: Unit, seconds: float, actor: int | None) -> None:
        """Store a unit that ended remotely (see :meth:`_collect`) and wake whoever waits for a unit to end."""
        try:
            if not self._collect(ray, run.engine, ref, unit, seconds) and actor is not None:
                with self._lock:  # its process or node is gone: later units go to the others
                    if actor < len(self._actors):
                        self._actors[actor] = None
        except Exception:  # the store failed: the unit's lease expires and it is queued again
            log.exception("unit %s: persisting its Ray outcome failed; requeued when its lease expires", unit.unit_id)
        finally:
            run.signal()
            run.engine.notify()

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

    def warm(self, fn: Callable[[], Any]) -> str:
        """Load what every unit needs (``fn``, the executor's ``warm``) before the first unit comes."""
        fn()
        import ray

        return ray.get_runtime_context().get_node_id()

    def run(self, fn: Callable[..., tuple[dict | None, Any]], *args: Any) -> tuple[str, tuple[dict | None, Any]]:
        return _on_node(fn, *args)


def _on_node(fn: Callable[..., tuple[dict | None, Any]], *args: Any) -> tuple[str, tuple[dict | None, Any]]:
    """On the worker: (the id of the node it runs on, ``fn(*args)``)."""
    import ray

    return ray.get_runtime_context().get_node_id(), fn(*args)
