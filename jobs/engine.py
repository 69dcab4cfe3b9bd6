"""The engine: unit kinds registered by name, worker threads that claim units under a lease, a heartbeat.

``JobEngine.start`` runs background workers for a pool (the app's: they run units whether or not any browser is
open); ``JobEngine.run`` runs one job in the foreground until it ends (the ``pal`` commands), on threads or on an
executor such as :class:`jobs.ray_executor.RayExecutor`. Both share one lease protocol: a claimed unit's lease is
renewed every ``lease_s / 3`` seconds by the engine's heartbeat thread; the heartbeat also passes a job's cancel
to its running units (their ``ctx.cancel`` is set) and requeues units whose lease expired.

A unit's LLM calls wait for an endpoint's slot with the unit's height in its job's graph as their priority
(:func:`backends.llm.limits.call_priority`; :meth:`jobs.store.JobStore.heights`): with few users a job's critical
path is its memory builds, each a chain of sessions that every simulation and judgment after it waits for, and their
calls then go before those of units nothing waits on, instead of queueing behind them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from backends.llm.errors import Cancelled
from backends.llm.limits import call_priority
from backends.store.leases import pid_alive
from jobs.store import HOST, JobStore
from jobs.types import JobSpec, JobSummary, Unit
from jobs.units import Registry, ThrottledProgress, UnitContext, run_patiently

log = logging.getLogger(__name__)

PROGRESS_S = 0.5  # a unit's progress is written at most this often (its last report always is)
IDLE_POLL_S = 2.0  # the longest a worker with nothing to claim waits before it looks again (work of other processes)
_LIVE_TOKENS: set[str] = set()  # tokens of the engines alive in this process


class Executor(Protocol):
    """Runs the units of one job to its end (:class:`jobs.ray_executor.RayExecutor`; threads are built in)."""

    def run(self, engine: JobEngine, job_id: str, concurrency: int, on_progress: Callable[[JobSummary], None] | None,
            stop: threading.Event) -> None: ...


EnvFor = Callable[[str, dict[str, Any]], Any]  # (job id, job config) -> the environment its units run in


class JobEngine:
    """Submit, run, watch, cancel and retry jobs of one run store (one engine per workspace)."""

    def __init__(self, store: JobStore, registry: Registry, env_for: EnvFor, *, lease_s: float = 30.0,
                 poll_s: float = 0.25):
        self.store, self.registry, self.env_for = store, registry, env_for
        self.lease_s, self.poll_s = lease_s, poll_s
        self.progress_s = PROGRESS_S
        self.token = uuid.uuid4().hex[:8]
        self.owner = f"{HOST}:{os.getpid()}:{self.token}"
        _LIVE_TOKENS.add(self.token)
        self._live: dict[str, UnitContext] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition()  # whoever follows a job (run, wait): woken whenever a unit ends
        self._idle = threading.Lock()  # idle workers wait on one condition per (pool, job) they claim from
        self._groups: dict[tuple[str | None, str | None], threading.Condition] = {}
        self._signals = 0  # events so far: a worker that missed one while it claimed does not wait
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self._heart: threading.Thread | None = None
        self._envs: dict[str, Any] = {}
        self._heights: dict[str, dict[str, int]] = {}  # job → unit → height (see :meth:`priority`)
        self._heights_lock = threading.Lock()

    # ------------------------------------------------------------------ submitting and controls

    def submit(self, spec: JobSpec, env: Any = None) -> str:
        """Store the job (re-submitting adds only new units and queues failed ones again). ``env``: the
        environment its units run in here (a command's own LLM client, a browser session's settings); without
        it — and in any other process — the environment comes from the job's stored configuration."""
        for u in spec.units:
            self.registry.get(u.kind)
        job_id = self.store.submit(spec)
        with self._heights_lock:
            self._heights.pop(job_id, None)  # units may have come: worked out again when one runs
        if env is not None:
            self._envs[job_id] = env
        else:
            self._envs.pop(job_id, None)
        self.notify()
        return job_id

    def cancel(self, job_id: str) -> None:
        self.store.cancel(job_id)
        with self._lock:
            for ctx in self._live.values():
                if ctx.unit.job_id == job_id:
                    ctx.cancel.set()

    def retry(self, job_id: str, unit_ids: list[str] | None = None) -> int:
        n = self.store.retry(job_id, unit_ids)
        self.notify()
        return n

    def notify(self, everyone: bool = False) -> None:
        """Something changed (a unit ended, a job came): wake whoever follows a job, and one idle worker — not all
        of them: dozens of workers claiming at once for the one unit that became ready each took the write lock
        for nothing. A worker that claims a unit wakes the next, so units that became ready together are taken up
        one after another. One worker of each group (the workers claiming from one pool or one job), as one group's
        workers cannot take another's units. ``everyone``: every worker too (they are to stop)."""
        with self._wake:
            self._wake.notify_all()
        with self._idle:
            self._signals += 1
            for group in self._groups.values():
                group.notify_all() if everyone else group.notify()

    def _group(self, pool: str | None, job_id: str | None) -> threading.Condition:
        with self._idle:
            return self._groups.setdefault((pool, job_id), threading.Condition(self._idle))

    def live(self, unit_id: str) -> UnitContext | None:
        """The context of a unit running in this process (for in-memory details such as streamed text)."""
        with self._lock:
            return self._live.get(unit_id)

    # ------------------------------------------------------------------ workers

    def recover(self) -> int:
        """Requeue the units of dead workers on this host and those whose lease expired, and bring the ready-queue
        in step with the units (done at every start)."""
        n = self.store.requeue_dead(_owner_alive) + self.store.requeue_expired()
        if n:
            log.info("requeued %d unit(s) of dead workers", n)
        if fixed := self.store.reindex():
            log.info("ready-queue: %d entr%s brought in step with the units", fixed, "y" if fixed == 1 else "ies")
        return n

    def start(self, workers: int = 4, pool: str = "app") -> None:
        """Background workers for ``pool`` (idempotent); they run until :meth:`stop` (daemon threads)."""
        with self._lock:
            if self._workers:
                return
            self._stop.clear()
            _LIVE_TOKENS.add(self.token)
            self.recover()
            self._ensure_heartbeat()
            for i in range(max(1, workers)):
                t = threading.Thread(target=self._loop, kwargs={"pool": pool}, name=f"job-worker-{i}", daemon=True)
                self._workers.append(t)
                t.start()

    @property
    def started(self) -> bool:
        return bool(self._workers)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the workers: running units see their cancel flag and are released to the queue."""
        self._stop.set()
        with self._lock:
            for ctx in self._live.values():
                ctx.cancel.set()
        self.notify(everyone=True)
        for t in self._workers:
            t.join(timeout)
        self._workers = []
        _LIVE_TOKENS.discard(self.token)

    def _ensure_heartbeat(self) -> None:
        if self._heart is None or not self._heart.is_alive():
            self._heart = threading.Thread(target=self._beat, name="job-heartbeat", daemon=True)
            self._heart.start()

    def _beat(self) -> None:
        while not self._stop.wait(max(0.05, self.lease_s / 3)):
            try:
                cancelled = self.store.heartbeat(self.owner, self.lease_s)
                self.store.requeue_expired()
            except Exception:  # a locked or vanished database must not kill the heartbeat
                log.exception("job heartbeat failed")
                continue
            with self._lock:
                for uid in cancelled:
                    if uid in self._live:
                        self._live[uid].cancel.set()

    def _loop(self, pool: str | None = None, job_id: str | None = None, stop: threading.Event | None = None,
              watched: bool = True) -> None:
        idle, group = self.poll_s, self._group(pool, job_id)
        while not self._stop.is_set() and not (stop is not None and stop.is_set()):
            seen = self._signals
            try:
                unit = self.store.claim(self.owner, self.lease_s, job_id=job_id, pool=pool, kinds=self.registry.names())
            except Exception:  # e.g. the database is busy beyond its timeout: try again shortly
                log.exception("claiming a unit failed")
                unit = None
            if unit is None:  # woken when a unit of this process ends or a job comes; else look less often
                with group:
                    if self._signals == seen:
                        group.wait(idle)
                idle = min(2 * idle, max(self.poll_s, IDLE_POLL_S))
                continue
            idle = self.poll_s
            with group:  # another unit may be ready too: the next idle worker looks
                group.notify()
            self.execute(unit, watched=watched)

    def priority(self, unit: Unit) -> int:
        """The priority of ``unit``'s LLM calls: its height in its job's graph (worked out once per job and engine;
        again when a unit of the job is not among those known, e.g. units another process added)."""
        with self._heights_lock:
            heights = self._heights.get(unit.job_id)
            if heights is None or unit.unit_id not in heights:
                try:
                    heights = self._heights[unit.job_id] = self.store.heights(unit.job_id)
                except Exception:  # a busy or vanished database: the unit runs, its calls at the lowest priority
                    log.exception("job %s: the units' heights could not be read", unit.job_id)
                    return 0
            return heights.get(unit.unit_id, 0)

    def env(self, job_id: str) -> Any:
        if job_id not in self._envs:
            self._envs[job_id] = self.env_for(job_id, self.store.config(job_id))
        return self._envs[job_id]

    def execute(self, unit: Unit, call: Callable[[UnitContext], dict | None] | None = None,
                watched: bool = True) -> str:
        """Run one claimed unit here and record how it ended; returns the unit's new status. A unit nobody
        ``watched`` runs in its environment's unwatched form (``env.unwatched()``: LLM answers are not streamed)."""
        cancel = threading.Event()
        progress = ThrottledProgress(lambda f, text: self._report(unit.unit_id, f, text), self.progress_s)
        ctx = UnitContext(unit, None, cancel, progress.report, watched=watched)
        with self._lock:
            self._live[unit.unit_id] = ctx
        started = time.perf_counter()
        try:
            ctx.env = self.env(unit.job_id)
            if not watched and callable(unwatched := getattr(ctx.env, "unwatched", None)):
                ctx.env = unwatched()
            with call_priority(self.priority(unit)):
                result = run_patiently(call or self.registry.get(unit.kind).run, ctx)
        except BaseException as e:  # every failure of a unit is recorded on it; the worker goes on
            log.debug("unit %s ended by %s", unit.unit_id, type(e).__name__, exc_info=True)
            progress.flush()
            return self._ended_badly(unit, ctx, e, time.perf_counter() - started)
        finally:
            with self._lock:
                self._live.pop(unit.unit_id, None)
        progress.flush()
        self.store.finish(unit.unit_id, self.owner, result, time.perf_counter() - started)
        self.notify()
        return "done"

    def _ended_badly(self, unit: Unit, ctx: UnitContext, e: BaseException, seconds: float) -> str:
        if ctx.cancel.is_set() or isinstance(e, Cancelled):
            status = "queued" if self._stop.is_set() else "cancelled"
            log.info("unit %s %s: %s", unit.unit_id, status, e)
            self.store.release(unit.unit_id, self.owner, status, str(e) or "cancelled")
            self.notify()
            return status
        if not isinstance(e, Exception):  # KeyboardInterrupt, SystemExit: give the unit back and stop
            self.store.release(unit.unit_id, self.owner)
            raise e
        log.exception("unit %s (%s) failed", unit.unit_id, unit.label)
        status = self.store.fail(unit.unit_id, self.owner, f"{type(e).__name__}: {e}"[:2000], seconds)
        log.debug("unit %s traceback: %s", unit.unit_id, "".join(traceback.format_exception(e)))
        self.notify()
        return status

    def _report(self, uid: str, fraction: float, text: str) -> None:
        try:
            self.store.set_progress(uid, self.owner, fraction, text)
        except Exception:  # progress is best effort; the unit goes on
            log.exception("progress of unit %s not recorded", uid)

    # ------------------------------------------------------------------ one job in the foreground

    def run(self, job_id: str, concurrency: int = 4, *, executor: Executor | None = None,
            on_progress: Callable[[JobSummary], None] | None = None, every: float = 1.0) -> JobSummary:
        """Run ``job_id``'s units until none can run (done, failed, blocked or cancelled) and return its summary.
        No page of this process watches them, so they run unwatched (see :meth:`execute`).

        A ``KeyboardInterrupt`` stops the workers, gives their units back to the queue and re-raises: the same
        command continues later without redoing a finished unit."""
        self.recover()
        self._ensure_heartbeat()
        stop = threading.Event()
        started, cpu0, wall0 = time.time(), time.process_time(), time.perf_counter()
        done0 = self.store.summary(job_id).counts.get("done", 0)
        if executor is not None:
            runner = threading.Thread(target=executor.run, args=(self, job_id, concurrency, None, stop),
                                      name="job-executor", daemon=True)
            threads = [runner]
        else:
            threads = [threading.Thread(target=self._loop, kwargs={"job_id": job_id, "stop": stop, "watched": False},
                                        name=f"job-{job_id[:12]}-{i}", daemon=True) for i in range(max(1, concurrency))]
        for t in threads:
            t.start()
        try:
            looked = 0.0
            while True:
                if time.monotonic() - looked >= every or not self._running_here(job_id):
                    summary, looked = self.store.summary(job_id), time.monotonic()
                    if on_progress:
                        on_progress(summary)
                    if summary.finished:
                        break
                if not any(t.is_alive() for t in threads):
                    break
                with self._wake:
                    self._wake.wait(every)
        except BaseException:
            self._interrupt(stop, threads)
            raise
        stop.set()
        self.notify(everyone=True)
        for t in threads:
            t.join()
        with self._idle:
            self._groups.pop((None, job_id), None)
        final = self.store.summary(job_id)
        self._record_run(job_id, started, time.perf_counter() - wall0, time.process_time() - cpu0,
                         final.counts.get("done", 0) - done0, type(executor).__name__ if executor else "threads")
        return final

    def _running_here(self, job_id: str) -> bool:
        """Whether a unit of ``job_id`` runs on this process's workers now. While one does, the job cannot have
        ended, so :meth:`run` reads its summary (a count over all of the job's units: a 100-user experiment queues
        tens of thousands) once every ``every`` seconds rather than whenever a unit ends."""
        with self._lock:
            return any(ctx.unit.job_id == job_id for ctx in self._live.values())

    def _record_run(self, job_id: str, started: float, wall: float, cpu: float, units: int, executor: str) -> None:
        """Keep the run's cost (what plans read as the app's CPU per call); a run that finished nothing says nothing."""
        if units <= 0:
            return
        try:
            self.store.record_run(job_id, started, wall, cpu, units, executor)
        except Exception:  # the run's work is stored; only its cost figure is lost
            log.exception("job %s: the run's wall and CPU seconds were not recorded", job_id)

    def _interrupt(self, stop: threading.Event, threads: list[threading.Thread]) -> None:
        stop.set()
        self._stop.set()
        with self._lock:
            for ctx in self._live.values():
                ctx.cancel.set()
        self.notify(everyone=True)
        for t in threads:
            t.join(30)
        self._stop.clear()

    def wait(self, job_id: str, timeout: float = 60.0) -> JobSummary:
        """Block until the job has finished (or ``timeout`` passed); returns its summary."""
        deadline = time.monotonic() + timeout
        while True:
            summary = self.store.summary(job_id)
            if summary.finished or time.monotonic() > deadline:
                return summary
            with self._wake:
                self._wake.wait(min(self.poll_s, max(0.01, deadline - time.monotonic())))


def _owner_alive(owner: str) -> bool:
    """An owner on this host is alive while its process is, and — in this process — while its engine is."""
    try:
        _host, pid, token = owner.split(":")
    except ValueError:
        return False
    if int(pid) == os.getpid():
        return token in _LIVE_TOKENS
    return pid_alive(int(pid))
