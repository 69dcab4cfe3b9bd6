"""Run many simulations at once: plan every (user, query topic, method), run them on N worker threads.

Run ids come from the specs, so a batch is resumable by construction: re-running the same batch skips
the finished runs and completes the partial and failed ones at their next missing utterance (each
utterance is written exactly once, see :mod:`sim.runner`). A cancel stops each worker between two
utterances and leaves its run resumable.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Protocol

from backends.llm.client import LLMClient
from backends.llm.errors import LLMError
from backends.store.leases import process_holder
from memory.methods import get_method_class
from memory.store import logs_stage
from palset.dataset import Dataset
from sim.runner import RunElsewhere, Simulation
from sim.schedule import fixed_schedule
from sim.service import make_spec
from sim.simulator import SimulationError
from sim.store import SimStore, run_id_for
from sim.types import RunSpec, SimulatorKind

log = logging.getLogger(__name__)

LLMFactory = Callable[[], LLMClient]  # called once per worker thread


class SimulationParts(Protocol):
    """What a batch needs from the composition root (:class:`studio.workspace.Workspace`)."""

    sims: SimStore

    def open_simulation(self, dataset: Dataset, spec: RunSpec, llm: LLMClient) -> Simulation: ...


@dataclass
class RunOutcome:
    """What one run of the batch ended as: finished, failed, skipped (already finished) or cancelled."""

    run_id: str
    status: str
    utterances: int = 0  # stored utterances of the run after this batch
    written: int = 0  # of which written by this batch
    seconds: float = 0.0
    error: str | None = None


Progress = Callable[[int, int, RunOutcome], None]  # (runs done, runs total, the run just done)


@dataclass
class BatchSummary:
    runs: int = 0
    finished: int = 0
    failed: int = 0
    skipped: int = 0
    cancelled: int = 0
    utterances_written: int = 0
    llm_calls: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    wall_seconds: float = 0.0
    session_id: str = ""
    errors: dict[str, str] = field(default_factory=dict)  # run id → error of the failed runs

    def as_dict(self) -> dict:
        return asdict(self)


def plan_runs(dataset: Dataset, methods: Iterable[str], users: Iterable[str] | None = None, topics: str = "query",
              seed: str = "0", task_ids: Iterable[str] | None = None, simulator: SimulatorKind = "llm",
              user_style: bool = False) -> list[RunSpec]:
    """Fixed-schedule specs for every topic of every selected user's query sessions (``topics="all"``: every
    session), for each method, with the user played by ``simulator`` (``user_style``: :mod:`sim.style`).
    ``task_ids`` (``{sample_id}_{topic_key}``, PAL-Set's dialogue-task ids) keep only those topics, of any
    session. Unknown users, methods, task ids or topic selections raise ``ValueError``."""
    methods = list(methods)
    for method in methods:
        get_method_class(method)
    if topics not in ("query", "all"):
        raise ValueError(f"unknown topic selection {topics!r} (query, all)")
    wanted = set(task_ids) if task_ids is not None else None
    if users is not None:
        uids = list(users)
    elif wanted is not None:
        uids = sorted({t.split("_sample")[0] for t in wanted})
    else:
        uids = sorted(dataset.users)
    missing = [u for u in uids if u not in dataset.users]
    if missing:
        raise ValueError(f"no user {missing[0]!r} in {dataset.root}")
    specs, found = [], set()
    for uid in uids:
        user = dataset.users[uid]
        for session in (user.query if topics == "query" and wanted is None else user.sessions):
            for topic in session.topics:
                if wanted is not None and session.task_id(topic.key) not in wanted:
                    continue
                found.add(session.task_id(topic.key))
                specs += [make_spec(dataset, uid, session.sample_id, topic.key, m, mode="fixed", seed=seed,
                                    simulator=simulator, user_style=user_style) for m in methods]
    if wanted is not None and wanted - found:
        raise ValueError(f"no topic {sorted(wanted - found)[0]!r} in {dataset.root} (task ids look like "
                         "1002_sample7_topic-1)")
    return specs


class _Batch:
    """The shared state of one batch: parts, cancel flag, the locks that serialise opening and memory builds."""

    def __init__(self, parts: SimulationParts, dataset: Dataset, llm_factory: LLMFactory, cancel: threading.Event,
                 session_id: str):
        self.parts, self.dataset, self.llm_factory, self.cancel = parts, dataset, llm_factory, cancel
        self.store = parts.sims
        self.session_id = session_id
        self.open_lock = threading.Lock()
        self._build_locks: dict[tuple[str, str], threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._local = threading.local()
        self.stores: list = []  # run stores of the clients made, for the accounting totals

    def build_lock(self, user_id: str, method: str) -> threading.Lock:
        with self._locks_lock:
            return self._build_locks.setdefault((user_id, method), threading.Lock())

    def llm(self) -> LLMClient:
        """This worker thread's client (one per thread: its HTTP connections are reused from run to run)."""
        client = getattr(self._local, "llm", None)
        if client is None:
            client = self._local.llm = self.llm_factory().for_session(self.session_id)
            with self._locks_lock:
                self.stores.append(client.store)
        return client

    def run_one(self, spec: RunSpec) -> RunOutcome:
        """Skip, resume or create the run for ``spec`` and drive it to its end; never raises."""
        run_id = run_id_for(spec)
        started = time.perf_counter()
        try:
            stored = self._stored_status(run_id)
            if stored is not None and stored[0] == "finished":
                return RunOutcome(run_id, "skipped", utterances=stored[1])
            if self.cancel.is_set():
                return RunOutcome(run_id, "cancelled", utterances=stored[1] if stored else 0)
            sim = self._open(spec)
            outcome = self._drive(sim)
        except Exception as e:  # one broken run must not end the batch; it is reported
            if self.cancel.is_set():  # e.g. a memory build stopped by the cancel: resumable, not failed
                log.info("run %s cancelled while opening: %s", run_id, e)
                return RunOutcome(run_id, "cancelled", seconds=time.perf_counter() - started)
            log.exception("run %s failed outside its dialogue", run_id)
            outcome = RunOutcome(run_id, "failed", error=f"{type(e).__name__}: {e}")
            self._mark_failed(run_id, outcome.error)
        outcome.seconds = time.perf_counter() - started
        return outcome

    def _stored_status(self, run_id: str) -> tuple[str, int] | None:
        try:
            record = self.store.load(run_id)
        except KeyError:
            return None
        return record.status, len(record.utterances)

    def _open(self, spec: RunSpec) -> Simulation:
        """Open (create or resume) the run; build the memory it needs, one build per (user, method) at a time."""
        llm = self.llm()
        with self.open_lock:  # embedder/Chroma clients are created once per workspace: not concurrently
            sim = self.parts.open_simulation(self.dataset, spec, llm)
        builder = sim.assistant.builder
        if builder is not None:
            with self.build_lock(spec.user_id, spec.method):
                pos = [s.sample_id for s in builder.user.sessions].index(spec.sample_id)
                if logs_stage(pos) not in set(builder.store.done_stages(builder.build_id)):
                    builder.run(until_session=pos, cancel=self.cancel)
        sim.driver = process_holder(f"pal simulate {self.session_id}")  # a tab driving the run makes this one skip
        sim.resume()  # a batch completes every fixed-schedule run, failed or stopped before
        return sim

    def _drive(self, sim: Simulation) -> RunOutcome:
        """Step to the end of the schedule, or until cancelled (the run stays resumable)."""
        before = len(sim.record.utterances)
        try:
            while not self.cancel.is_set():
                if sim.step() is None:
                    break
        except RunElsewhere as e:  # a browser tab drives it: leave it to that driver
            return RunOutcome(sim.record.run_id, "skipped", utterances=len(sim.record.utterances),
                              written=len(sim.record.utterances) - before, error=str(e))
        except (SimulationError, LLMError) as e:
            sim.fail(str(e))
        sim.release()
        status = sim.record.status if sim.record.status in ("finished", "failed") else "cancelled"
        n = len(sim.record.utterances)
        return RunOutcome(sim.record.run_id, status, utterances=n, written=n - before, error=sim.record.error)

    def _mark_failed(self, run_id: str, error: str | None) -> None:
        """Record the failure on the run, when the run was created (a spec naming a missing topic never is)."""
        if self.store.exists(run_id):
            self.store.set_status(run_id, "failed", error)


def run_batch(parts: SimulationParts, dataset: Dataset, specs: list[RunSpec], llm_factory: LLMFactory,
              concurrency: int = 4, progress: Progress | None = None,
              cancel: threading.Event | None = None) -> BatchSummary:
    """Run every spec on ``concurrency`` threads (each thread with its own client from ``llm_factory``).

    A ``KeyboardInterrupt`` sets the cancel flag, waits for the workers to stop between utterances and
    re-raises: every stored utterance stays and the same batch resumes later.
    """
    cancel = cancel or threading.Event()
    batch = _Batch(parts, dataset, llm_factory, cancel, f"batch-{uuid.uuid4().hex[:12]}")
    summary = BatchSummary(runs=len(specs), session_id=batch.session_id)
    started = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="sim")
    try:
        futures: list[Future] = [pool.submit(batch.run_one, spec) for spec in _longest_first(dataset, specs)]
        for done, future in enumerate(as_completed(futures), 1):
            outcome = future.result()
            _count(summary, outcome)
            if progress:
                progress(done, len(specs), outcome)
    except BaseException:
        cancel.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
    summary.wall_seconds = round(time.perf_counter() - started, 3)
    _add_totals(summary, batch)
    return summary


def _longest_first(dataset: Dataset, specs: list[RunSpec]) -> list[RunSpec]:
    """Longest schedules first, so the last runs to finish are short ones and no worker idles long at the end."""
    def turns(spec: RunSpec) -> int:
        return len(fixed_schedule(dataset, f"{spec.sample_id}_{spec.topic_key}")[0]) if spec.mode == "fixed" else 0
    return sorted(specs, key=turns, reverse=True)


def _count(summary: BatchSummary, outcome: RunOutcome) -> None:
    setattr(summary, outcome.status, getattr(summary, outcome.status) + 1)
    summary.utterances_written += outcome.written
    if outcome.status == "failed":
        summary.errors[outcome.run_id] = outcome.error or "failed"


def _add_totals(summary: BatchSummary, batch: _Batch) -> None:
    """LLM accounting of this batch: every call its clients recorded under the batch's session id."""
    if not batch.stores:
        return
    totals = batch.stores[0].totals(session_id=batch.session_id)
    summary.llm_calls, summary.cache_hits = totals.calls, totals.cache_hits
    summary.tokens_in, summary.tokens_out = totals.tokens_in, totals.tokens_out
