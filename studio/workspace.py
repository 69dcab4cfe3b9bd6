"""The composition root: one :class:`Workspace` per process builds every store, client and builder.

A workspace is a home folder (``PAL_HOME``) plus a platform configuration. Constructing it opens the
run store (applying every domain's migrations once), the response cache, the per-domain stores, the
local model servers, and — lazily — embedders and the Chroma client. Nothing else in PAL Studio
constructs these: pages get the process's workspace through :func:`ui.platform_state.workspace`, the CLI
and batch drivers construct one, tests construct one over a temporary home (with fake providers).

:meth:`Workspace.with_config` gives a view with another configuration (a browser session's Settings
overrides) that shares every store and cache with its parent.

A workspace opened ``read_only`` (a bundle opened for presenting, :mod:`studio.presentation`) applies no
migration, builds no LLM client and opens its run store read-only: every write of a record raises
:class:`~backends.store.db.ReadOnlyError`, so a presentation cannot change what it shows.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from backends.config import (
    ROLES,
    ConfigError,
    EndpointLimits,
    PlatformConfig,
    RoleConfig,
    allowed_endpoints,
    check_endpoint,
    endpoint_changed,
    load_config,
)
from backends.embeddings import CachedEmbedder, Embedder, LazyEmbedder, fingerprint, load_embedder, resolve_name
from backends.llm.client import LLMClient
from backends.llm.limits import Limiters
from backends.llm.local_server import LocalServers
from backends.llm.registry import ChatProvider
from backends.logs import configure_logging, current_log_file
from backends.paths import StatePaths, default_home, make_private
from backends.store import schema as platform_schema
from backends.store.audit import AuditStore
from backends.store.cache import ResponseCache
from backends.store.capabilities import CapabilityStore
from backends.store.db import Database, ReadOnlyError
from backends.store.embed_cache import EmbeddingCache
from backends.store.leases import LeaseStore
from backends.store.runstore import RunStore
from backends.store.schema import Migration, migrate_database
from backends.store.tables import TableStore
from backends.vectorstore import BruteForceStore, ChromaStore, VectorStore, open_chroma
from evaluation import schema as evaluation_schema
from evaluation.fidelity.store import FidelityStore
from evaluation.simfidelity.instruments import InstrumentStore
from evaluation.simfidelity.store import SimFidelityStore
from evaluation.store import EvalStore, PersonaMemStore
from jobs import schema as jobs_schema
from jobs.engine import JobEngine
from jobs.store import JobStore
from memory import schema as memory_schema
from memory.build import MemoryBuilder
from memory.methods import get_method_class
from memory.store import MemoryStore
from palset.dataset import Dataset, User, dataset_key
from palset.loader import load_dataset
from review import schema as review_schema
from review.accounts import AccountStore
from review.sessions import CookieSigner, SessionPolicy, SessionStore, key_stamp, load_key
from review.store import ReviewStore
from review.throttle import SignInThrottle
from sim import schema as sim_schema
from sim.runner import Simulation
from sim.service import open_simulation
from sim.store import SimStore, run_id_for
from sim.types import RunSpec
from synth.store import SynthStore

log = logging.getLogger(__name__)

MIGRATIONS: list[Migration] = [*platform_schema.MIGRATIONS, *memory_schema.MIGRATIONS, *sim_schema.MIGRATIONS,
                               *evaluation_schema.MIGRATIONS, *review_schema.MIGRATIONS, *jobs_schema.MIGRATIONS]


class Workspace:
    """Every store, cache and client of one PAL_HOME; see the module docstring."""

    def __init__(self, home: Path | None = None, config: PlatformConfig | None = None, *,
                 providers: dict[str, ChatProvider] | None = None, servers: LocalServers | None = None,
                 read_only: bool = False, takes_log: bool | None = None):
        """``providers`` (role → provider) answer those roles in every client built here: tests pass fakes.
        ``servers``: local model servers shared with other workspaces (a test session's; default: this
        workspace's own, under its home). ``read_only``: see the module docstring (the home must exist).
        ``takes_log`` (default: unless read-only): the process's log moves under this home; a presentation's
        workspaces leave it where the app's home put it (only the first one takes it when none is set)."""
        self.paths = StatePaths(Path(home) if home is not None else default_home())
        self.read_only = read_only
        self.presented: Any = None  # the manifest of the bundle a presentation shows (studio.presentation)
        self.made_with: list[Any] = []  # for a presentation: what its records show made them (studio.presentation)
        if not read_only:
            self.paths.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        takes_log = not read_only if takes_log is None else takes_log
        self.log_file = (current_log_file() if not takes_log else None) or configure_logging(self.paths.logs)
        self.config = config if config is not None else load_config()
        self.db = Database(self.paths.runs_db, read_only=read_only)
        if not read_only:
            applied = migrate_database(self.db, MIGRATIONS)
            if applied:
                log.info("run store %s: applied migrations %s", self.paths.runs_db, applied)
        self.tables = TableStore(self.db)
        self.runs = RunStore(self.db, CapabilityStore(self.db))
        self.audit = AuditStore(self.db)
        self.leases = LeaseStore(self.db)
        # no records; a read-only workspace (a presentation) has no LLM client, so no cache and no cache file
        self.cache: ResponseCache | None = None if read_only else ResponseCache(Database(self.paths.cache_db))
        self.memory = MemoryStore(self.db)
        self.fidelity = FidelityStore(self.db)
        self.simfidelity = SimFidelityStore(self.db)
        self.instruments = InstrumentStore(self.db)
        self.sims = SimStore(self.db, self.leases)
        self.evals = EvalStore(self.db)
        self.personamem = PersonaMemStore(self.db)
        self.reviews = ReviewStore(self.db)
        self.accounts = AccountStore(self.db)
        self.sessions = SessionStore(self.db, CookieSigner(lambda: load_key(self.paths.session_key),
                                                           lambda: key_stamp(self.paths.session_key)), _session_policy())
        if not read_only:  # its stores exist now: folders 0700, files 0600 (an existing home tightened, logged)
            make_private(self.paths.home)
        self.synth = SynthStore(self.paths.synth)
        self.servers = servers if servers is not None else LocalServers(self.paths.local_server)
        self.sign_in_throttle = SignInThrottle()  # backoff after failed sign-ins, shared by every browser session
        self._providers = dict(providers or {})
        self._shared: dict[str, Any] = {"embedders": {}, "vectors": {}, "chroma": None, "datasets": {},
                                      "build_locks": {}}
        self._lock = threading.RLock()
        self.limiters = Limiters(self.config.limits)
        from studio.units import build_registry

        self.jobs = JobEngine(JobStore(self.db), build_registry(), self._job_env)

    @property
    def home(self) -> Path:
        return self.paths.home

    def with_config(self, config: PlatformConfig) -> Workspace:
        """This workspace under another configuration (same stores, caches, servers, embedders)."""
        view = copy.copy(self)
        view.config = config
        self.limiters.configure(config.limits)
        return view

    def configured(self, job_config: dict[str, Any]) -> Workspace:
        """This workspace under a job's or an experiment's configuration (see :func:`config_with`)."""
        return self.with_config(config_with(self.config, job_config)) if job_config else self

    def _job_env(self, job_id: str, job_config: dict[str, Any]) -> Any:
        """The environment units of a job run in (jobs submitted without one, or found after a restart)."""
        from studio.units import UnitEnv

        view = self.configured(job_config)
        return UnitEnv(view, view.llm(session_id=job_id))

    def build_lock(self, build_id: str) -> threading.Lock:
        """One lock per memory build in this process: two units never advance the same build at once."""
        locks: dict[str, threading.Lock] = self._shared["build_locks"]
        with self._lock:
            return locks.setdefault(build_id, threading.Lock())

    def dataset(self, path: str | Path) -> Dataset:
        """The dataset folder at ``path``, loaded once per workspace (units of many jobs share it)."""
        key = str(Path(path).expanduser().resolve())
        datasets: dict[str, Dataset] = self._shared["datasets"]
        with self._lock:
            if key not in datasets:
                loaded = load_dataset(key, lazy=True)
                if not loaded.users:
                    problems = "; ".join(str(p) for p in loaded.problems[:3])
                    raise ValueError(f"{path}: no users ({problems})")
                datasets[key] = loaded
            return datasets[key]

    # ------------------------------------------------------------------ LLM clients

    def llm(self, session_id: str | None = None, providers: dict[str, ChatProvider] | None = None) -> LLMClient:
        """A client for every role under this workspace's configuration (calls recorded in the run store);
        ``providers`` (role → provider) answer those roles instead of the configured ones (tests' fakes).
        A read-only workspace (a presentation) has none: :class:`ReadOnlyError`."""
        if self.read_only or self.cache is None:
            raise ReadOnlyError(f"{self.home} is open for presenting: no LLM calls are made")
        return LLMClient(self.config, store=self.runs, cache=self.cache, providers={**self._providers, **(providers or {})},
                         servers=self.servers, session_id=session_id, limiters=self.limiters)

    # ------------------------------------------------------------------ embedders and vectors

    def embedder(self, name: str | None = None, language: str | None = "en") -> Embedder:
        """The embedder of this name (``auto`` resolved by language), loaded once per workspace on its first use."""
        resolved = resolve_name(name or self.config.embedder.name, language)
        embedders: dict[str, Embedder] = self._shared["embedders"]
        with self._lock:
            if resolved not in embedders:
                def load(name: str = resolved) -> Embedder:
                    log.info("loading embedder %s", name)
                    return load_embedder(name, language, self.config.embedder.batch_size)

                cache = self.embed_cache()
                embedders[resolved] = (LazyEmbedder(resolved, load) if cache is None
                                       else CachedEmbedder(resolved, fingerprint(resolved), load, cache))
            return embedders[resolved]

    def embed_cache(self) -> EmbeddingCache | None:
        """The home's persistent embedding cache (opened on first use, shared by every view of this workspace); a
        read-only workspace (a presentation) writes nothing, so it has none and embeds with the model."""
        if self.read_only:
            return None
        with self._lock:
            if self._shared.get("embed_cache") is None:
                self._shared["embed_cache"] = EmbeddingCache(self.paths.embed_cache, Database)
            cache: EmbeddingCache = self._shared["embed_cache"]
            return cache

    def vectors(self, embedder: Embedder) -> VectorStore:
        """The Chroma collections of this embedder (one Chroma client per workspace); a read-only workspace keeps
        its vectors in memory (exact search, nothing written: a presentation's builds embed their items there)."""
        stores: dict[str, VectorStore] = self._shared["vectors"]
        with self._lock:
            if embedder.name not in stores and self.read_only:
                stores[embedder.name] = BruteForceStore(embedder)
            if embedder.name not in stores:
                if self._shared["chroma"] is None:
                    self._shared["chroma"] = open_chroma(self.paths.chroma)
                stores[embedder.name] = ChromaStore(embedder, self._shared["chroma"])
            return stores[embedder.name]

    # ------------------------------------------------------------------ memory and simulation

    def open_builder(self, dataset: Dataset, user_id: str, method: str, *, llm: LLMClient | None = None,
                     fresh: bool = False, method_config: dict | None = None,
                     embedder: str | None = None) -> MemoryBuilder:
        """The memory builder of ``method`` for this user of ``dataset`` — the same build whoever asks.

        See :meth:`open_user_builder` for which build is opened."""
        if user_id not in dataset.users:
            known = ", ".join(list(dataset.users)[:10])
            raise KeyError(f"no user {user_id!r} in {dataset.root} (users: {known}…)")
        return self.open_user_builder(dataset_key(dataset.root), dataset.users[user_id], method, llm=llm,
                                      fresh=fresh, method_config=method_config, embedder=embedder)

    def open_user_builder(self, dataset: str, user: User, method: str, *, llm: LLMClient | None = None,
                          fresh: bool = False, method_config: dict | None = None,
                          embedder: str | None = None, build_id: str | None = None) -> MemoryBuilder:
        """The builder of ``method`` for ``user`` under the dataset key ``dataset`` (a PAL-Set folder's key, or
        any stable name, e.g. a PersonaMem-v2 chat history's).

        Reuse policy: when a build of (dataset, user, method) is stored, the newest one is reopened with
        its own method config and embedder, so the Memory page, Simulate, Evaluate and the CLI all show
        and use one memory. A new build (the configured embedder, the method's defaults) is opened when
        none is stored, when ``fresh`` is set (a person asked for a build with the current settings), or
        when ``method_config`` or ``embedder`` name one explicitly (benches, experiments, ``--embedder``).
        ``build_id`` opens that stored build of (dataset, user, method) instead of the newest (a page offering
        every stored build, e.g. those made by other memory builders). The builder gets its own run-scoped LLM
        client when the method uses one (``llm``, or a new client).
        """
        config = dict(method_config or {})
        embedder_name = embedder
        explicit = fresh or method_config is not None or embedder is not None
        stored = None if explicit else self.memory.find_build(dataset, user.uid, method)
        if build_id is not None and not explicit:
            known = {b.build_id for b in self.memory.builds_of(dataset, user.uid, method)}
            if build_id not in known:
                raise KeyError(f"no {method} build {build_id!r} of user {user.uid}")
            stored = build_id
        if stored is not None:
            info = self.memory.info(stored)
            config = {k: v for k, v in info.config.items() if k != "embedder"}
            embedder_name = info.config.get("embedder")
        if stored is None and self.read_only:
            raise ReadOnlyError(f"no {method} memory of user {user.uid} in this presentation (it holds only the "
                                "builds its bundle brought)")
        emb = self.embedder(embedder_name, user.language)
        uses_llm = get_method_class(method).uses_llm and not self.read_only
        client = (llm or self.llm()) if uses_llm else None
        return MemoryBuilder(dataset, user, method, self.memory, self.vectors(emb), emb, llm=client, config=config,
                             files_root=self.paths.method_files)

    def open_simulation(self, dataset: Dataset, spec: RunSpec, llm: LLMClient, *, pair_id: str | None = None,
                        builder: MemoryBuilder | None = None) -> Simulation:
        """The run for ``spec`` (created or resumed), its calls accounted to the run; its memory from
        :meth:`open_builder` (the build's calls accounted to the build)."""
        if builder is None and spec.method != "vanilla" and spec.user_id in dataset.users:
            builder = self.open_builder(dataset, spec.user_id, spec.method, llm=llm)
        return open_simulation(dataset, spec, llm.for_run(run_id_for(spec)), store=self.sims, builder=builder,
                               pair_id=pair_id)

    def close(self) -> None:
        """Stop the job workers and the local servers this workspace started (also done at exit)."""
        self.jobs.stop()
        self.servers.stop_all()


def _session_policy() -> SessionPolicy:
    try:
        return SessionPolicy.from_env()
    except ValueError:
        log.exception("sign-in sessions keep their default lifetimes")
        return SessionPolicy()


def config_with(base: PlatformConfig, job_config: dict[str, Any], env: Mapping[str, str] | None = None
                ) -> PlatformConfig:
    """``base`` with a job's ``roles`` (``default`` and per role: any role field but the key) and ``limits``
    (endpoint → limits) laid over it; a wrong value raises :class:`ConfigError` naming the role and field.

    As for the Settings page's overrides, a key stays with its endpoint: a role the job points at another provider or
    base URL gets no configured key (a job carries none), and every endpoint must be in ``PAL_ALLOWED_ENDPOINTS`` when
    that is set — so an experiment file cannot send the lab's key, or anything, to a server of its choosing."""
    roles = dict(base.roles)
    layers = job_config.get("roles", {})
    allowed = allowed_endpoints(os.environ if env is None else env)
    for role in ROLES:
        update = {k: v for k, v in {**layers.get("default", {}), **layers.get(role, {})}.items() if k != "api_key"}
        if not update:
            continue
        configured = base.role(role).model_dump()
        merged = {**configured, **update}
        if endpoint_changed(configured, merged):
            merged["api_key"] = None  # the configured key belongs to the configured endpoint only
        try:
            roles[role] = RoleConfig.model_validate(merged)
        except ValueError as e:
            raise ConfigError(f"role {role}: {e}") from None
        check_endpoint(role, roles[role], allowed)
    limits = {**base.limits, **{k: EndpointLimits.model_validate(v) for k, v in job_config.get("limits", {}).items()}}
    return base.model_copy(update={"roles": roles, "limits": limits})
