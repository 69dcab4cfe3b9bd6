"""Units on a Ray worker: gather a unit's records on the driver, run it on a scratch workspace, bring back what
it wrote (see :mod:`studio.records` and :class:`jobs.ray_executor.RayExecutor`).

The worker's workspace has the job's configuration (role endpoints, limits; API keys travel with it inside the
cluster), the same providers as the driver's (tests' scripted fakes), an empty run store seeded with the unit's
records, and the dataset at the same path as on the driver (a shared or copied folder on a real cluster).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends.config import PlatformConfig
from backends.llm.limits import Limiters
from backends.paths import StatePaths
from backends.store.leases import pid_alive
from jobs.ray_executor import RayExecutor
from jobs.types import Unit
from jobs.units import UnitContext
from memory.index import VectorIndex
from memory.methods import get_method_class
from memory.types import MemoryItem
from sim.store import run_id_for
from sim.types import RunSpec
from studio.records import (
    Bundle,
    all_rows,
    apply_rows,
    changed_files,
    changed_rows,
    export_rows,
    file_digests,
    read_files,
    write_files,
)

if TYPE_CHECKING:
    from studio.workspace import Workspace

log = logging.getLogger(__name__)
_WORKER_SHARED: dict = {}  # embedders, Chroma client, datasets: opened once per worker process, shared by its units
_WORKER_LOCK = threading.Lock()  # an actor runs several units at once on threads
_PROCESS: dict[str, Any] = {}  # once per worker process: "root" (_process_root), "home" (_template_home), "limiters"
ROOT_PREFIX = "pal-worker-"  # a worker process's folder under the temporary directory: pal-worker-<pid>-…


def _process_root() -> Path:
    """This worker process's folder (the caller holds ``_WORKER_LOCK``): its template home, vector indexes and
    units' homes, all in one place. Made at the first use, when the folders of worker processes that ended
    without removing theirs (an actor is ended by a signal) are removed."""
    root = _PROCESS.get("root")
    if root is None:
        _remove_dead_roots()
        root = _PROCESS["root"] = Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-"))
    return root


def _remove_dead_roots() -> None:
    """Remove the folders of this machine's worker processes that no longer run."""
    for path in Path(tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*-*"):
        pid = path.name[len(ROOT_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            log.info("removing %s: its worker process %s has ended", path, pid)
            shutil.rmtree(path, ignore_errors=True)


def _worker_shared() -> dict:
    """What a worker process's scratch workspaces share: its item vectors live in one process-wide Chroma folder
    (namespaced by build, re-indexed from the shipped rows before each unit), so no unit pays for a new client;
    ``indexed``: the item versions that folder holds. After :func:`_forget_vectors`, a fresh folder. The
    embedders' cache is the template home's (it lasts as long as the process, where a unit's home is removed
    after the unit: a cache there failed every read and write of the units after it)."""
    from backends.vectorstore import open_chroma

    global _WORKER_SHARED
    with _WORKER_LOCK:
        if _WORKER_SHARED.get("chroma") is None:
            folder = Path(tempfile.mkdtemp(prefix="chroma-", dir=_process_root()))
            _WORKER_SHARED = {**{k: _WORKER_SHARED.get(k) or {} for k in ("embedders", "datasets", "build_locks")},
                              "embed_cache": _PROCESS.get("embed_cache"),
                              "vectors": {}, "chroma": open_chroma(folder), "indexed": set()}
        return _WORKER_SHARED


def _template_home(config: PlatformConfig, providers: dict) -> Path:
    """An empty home with every migration applied, made once per worker process: a unit's scratch run store is a
    copy of it (a few milliseconds) where migrating a new one cost each unit some 15 ms of CPU. The worker
    process's log goes under it (it lasts as long as the process)."""
    from studio.workspace import Workspace

    with _WORKER_LOCK:
        if "home" not in _PROCESS:
            home = Path(tempfile.mkdtemp(prefix="template-", dir=_process_root()))
            ws = Workspace(home, config, providers=providers)
            _PROCESS["embed_cache"] = ws.embed_cache()
            ws.close()
            _close_stores(ws)
            _PROCESS["home"] = home
        return _PROCESS["home"]


def _worker_limiters(config: PlatformConfig) -> Limiters:
    """The worker process's endpoint limits, shared by every unit it runs (as a workspace's are by every job of a
    process): a limiter per unit let each unit in flight take the endpoint's whole width."""
    with _WORKER_LOCK:
        limiters = _PROCESS.get("limiters")
        if limiters is None:
            limiters = _PROCESS["limiters"] = Limiters(config.limits)
    limiters.configure(config.limits)
    return limiters


def _scratch_home(config: PlatformConfig, providers: dict) -> Path:
    """A fresh home for one unit whose run store and cache are copies of the template's (already migrated)."""
    template = StatePaths(_template_home(config, providers))
    with _WORKER_LOCK:
        root = _process_root()
    paths = StatePaths(Path(tempfile.mkdtemp(prefix="unit-", dir=root)))
    for source, target in ((template.runs_db, paths.runs_db), (template.cache_db, paths.cache_db)):
        with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
            src.backup(dst)
    return paths.home


def _close_stores(ws: Workspace) -> None:
    """Close a scratch workspace's databases (its folder is removed next)."""
    ws.db.close()
    if ws.cache is not None:
        ws.cache.db.close()


def warm_worker(config: PlatformConfig, providers: dict) -> None:
    """Once per worker process and run, before the run's first unit: import what units run, make the template
    home, open the configured embedder — the fixed cost of a worker, kept out of its units' time. A worker kept
    from an earlier run (of another home, perhaps) starts a fresh shared vector index: the versions it indexed
    are keyed by build, and a build of the same name in another home may hold other items."""
    from studio.units import build_registry
    from studio.workspace import Workspace

    _forget_vectors()
    build_registry()
    home = _scratch_home(config, providers)
    ws = Workspace(home, config, providers=providers, takes_log=False)
    ws._shared = _worker_shared()
    try:
        ws.embedder()
    finally:
        ws.close()
        _close_stores(ws)
        shutil.rmtree(home, ignore_errors=True)


def _forget_vectors() -> None:
    """After a failed unit: vectors of a half-done stage may be in the shared index, so the next unit starts with a
    fresh one (re-indexed from its rows); the loaded embedders and datasets stay. Units running meanwhile on other
    threads keep the index they started with (the shared things are replaced, never changed under them)."""
    global _WORKER_SHARED
    with _WORKER_LOCK:
        _WORKER_SHARED = {**_WORKER_SHARED, "vectors": {}, "chroma": None, "indexed": set()}


def unit_records(ws: Workspace, unit: Unit) -> Bundle:
    """The rows and files ``unit`` reads: its memory builds, the runs it continues or judges, stored results."""
    from studio.units import UnitEnv, builder_for

    p, env = unit.payload, UnitEnv(ws, ws.llm())
    builds, runs, files = [], [], []
    sel: dict[str, tuple[str, list[Any]]] = {}

    def build(user: str, method: str) -> None:
        if method == "vanilla":
            return
        b = builder_for(env, p["dataset"], user, method, p.get("method_config"), p.get("embedder"))
        builds.append(b.build_id)
        if (folder := b._files()) is not None:
            files.append(folder)

    if unit.kind in ("memory.session", "eval.tasks"):
        build(p["user"], p["method"])
    if unit.kind == "eval.tasks":
        sel["bench_results"] = ("user_id=? AND sample_id=? AND topic_key=? AND method=?",
                                [p["user"], p["sample"], p["topic"], p["method"]])
    if unit.kind == "sim.run":
        for raw in p["specs"]:
            spec = RunSpec.model_validate(raw)
            build(spec.user_id, spec.method)
            runs.append(run_id_for(spec))
    if unit.kind == "eval.judge":
        runs += [p["run_a"], p["run_b"]]
    if unit.kind == "sim.fidelity":
        runs.append(p["run_id"])
    if unit.kind == "synth.generate":
        files.append(ws.paths.synth / p["run_id"])
    if builds:
        marks = ",".join("?" * len(builds))
        for table in ("memory_builds", "memory_build_stages", "memory_items", "memory_forgotten"):
            sel[table] = (f"build_id IN ({marks})", builds)
    if runs:
        marks = ",".join("?" * len(runs))
        sel["sim_runs"] = (f"run_id IN ({marks})", runs)
        sel["sim_turns"] = (f"run_id IN ({marks})", runs)
    return Bundle(rows=export_rows(ws.db, sel), files=read_files(ws.home, files))


def reindex(ws: Workspace, rows: dict[str, list[dict]], seen: set | None = None) -> None:
    """Put memory item versions into this workspace's vector index, each with the validity (valid-from/to) the
    run store has: one upsert per (build, layer), as :meth:`memory.build.MemoryBuilder.ensure_index` does —
    a version closed by the unit is written again whole, where adding per stage and closing per stage took
    about 1.6 times the CPU for the same index. ``seen``: versions already indexed in this process (a worker's
    shared Chroma), skipped."""
    items = [r for r in rows.get("memory_items", []) if seen is None or _version(r) not in seen]
    if not items:
        return
    builds = {b["build_id"]: b for b in ws.memory.build_rows([r["build_id"] for r in items])}
    versions: dict[str, list[tuple[MemoryItem, int, int | None]]] = {}
    for row in items:
        versions.setdefault(row["build_id"], []).append(
            (MemoryItem.model_validate_json(row["data"]), row["valid_from"], row["valid_to"]))
    for build_id, group in versions.items():
        b = builds[build_id]
        if (searched := get_method_class(b["method"]).indexed_layers) is not None:  # as the build itself indexes
            group = [v for v in group if v[0].layer in searched]
        emb = ws.embedder(json.loads(b["config"]).get("embedder"))
        if group:
            VectorIndex(ws.vectors(emb), b["dataset"], b["user_id"], build_id).add_versions(group)
    if seen is not None:
        seen.update(_version(r) for r in items)


def _version(row: dict) -> tuple:
    return (row["build_id"], row["item_id"], row["version"], row["valid_from"], row["valid_to"])


def run_remote(kind: str, payload: dict, unit_id: str, job_id: str, config: PlatformConfig, providers: dict,
               records: Bundle) -> tuple[dict | None, Bundle]:
    """On the worker: a scratch workspace seeded with ``records``; the unit; what it changed."""
    from studio.units import UnitEnv, build_registry
    from studio.workspace import Workspace

    home = _scratch_home(config, providers)
    ws = Workspace(home, config, providers=providers, takes_log=False)
    ws._shared, ws.limiters = _worker_shared(), _worker_limiters(config)
    try:
        apply_rows(ws.db, records.rows)
        write_files(home, records.files)
        reindex(ws, records.rows, ws._shared["indexed"])
        before, files_before = all_rows(ws.db), file_digests(home)
        unit = Unit(unit_id=unit_id, job_id=job_id, seq=0, kind=kind, label=unit_id, payload=payload,
                    status="running", attempts=1, max_attempts=1)
        ctx = UnitContext(unit, UnitEnv(ws, ws.llm(session_id=job_id)).unwatched(), threading.Event(),
                          lambda f, t: None, watched=False)
        try:
            result = build_registry().get(kind).run(ctx)
        except BaseException:
            _forget_vectors()
            raise
        out = Bundle(rows=changed_rows(ws.db, before), files=changed_files(home, files_before))
        ws._shared["indexed"].update(_version(r) for r in out.rows.get("memory_items", []))  # indexed by the unit
        return result, out
    finally:
        ws.close()
        _close_stores(ws)
        shutil.rmtree(home, ignore_errors=True)


CPUS_PER_UNIT = 0.25  # a unit mostly waits on LLM endpoints: four share a CPU (PAL_RAY_CPUS_PER_UNIT overrides)


def ray_executor(ws: Workspace, address: str | None = None, num_cpus: int | None = None,
                 cpus_per_unit: float | None = None) -> RayExecutor:
    """The Ray executor for jobs of ``ws``: the cluster at ``address`` (else ``RAY_ADDRESS``, else a local
    instance), each unit asking for ``cpus_per_unit`` of a CPU."""

    def prepare(unit: Unit) -> tuple:
        env = ws.jobs.env(unit.job_id)
        job_ws = env.ws
        return (unit.kind, unit.payload, unit.unit_id, unit.job_id, job_ws.config, job_ws._providers,
                unit_records(job_ws, unit))

    def apply(unit: Unit, records: Bundle) -> None:
        apply_rows(ws.db, records.rows)
        write_files(ws.home, records.files)
        reindex(ws, records.rows)

    address = address or os.environ.get("RAY_ADDRESS") or None
    runtime_env = None if address else {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
                                        "working_dir": None}
    share = cpus_per_unit or float(os.environ.get("PAL_RAY_CPUS_PER_UNIT") or CPUS_PER_UNIT)
    executor = RayExecutor(prepare, run_remote, apply, address=address, num_cpus=num_cpus, cpus_per_unit=share,
                           runtime_env={k: v for k, v in (runtime_env or {}).items() if v is not None} or None,
                           warm=functools.partial(warm_worker, ws.config, ws._providers))
    executor.start()
    return executor
