"""Supervisor of the local model servers (xllamacpp in a child process, one per model).

A :class:`LocalServers` pool (one per workspace, so one per app process) holds one server per served model and
server configuration, shared by every caller (all browser sessions of the app): roles that name the same model
share its server, a role on another model (the judge on the 1.5B) gets its own. A server starts on demand on a
free 127.0.0.1 port — after its model file was made ready (joined, sha256-verified, checked as GGUF and against
the memory available: :mod:`backends.model_files`) and its thread count chosen (:mod:`backends.llm.threads`) — is
health-checked before use, restarted if it died, and stopped when the process exits (``atexit``; the child also
dies with its parent through ``PR_SET_PDEATHSIG``), so no orphan is left behind.
"""

from __future__ import annotations

import atexit
import logging
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from backends.config import LocalServerConfig
from backends.gguf import GGUFInfo, ModelUnavailable, available_memory, check_memory, estimate_memory
from backends.llm.errors import EndpointUnavailable
from backends.llm.threads import resolve_threads
from backends.local_models import CATALOG, LocalModel, find_model
from backends.model_files import Prepared, check_gguf_file, prepare_model, served_path
from backends.paths import PROJECT_ROOT

log = logging.getLogger(__name__)


def resolve_local_model(cfg: LocalServerConfig, model: str | None) -> LocalModel | Path:
    """The catalog model or the ``[local] model_path`` file a local role's ``model`` names (None: the default)."""
    name = model or cfg.default_model()
    entry = find_model(name)
    if entry is not None:
        return entry
    if cfg.model_path and name in (cfg.path_alias, cfg.model_path):
        return Path(cfg.model_path).expanduser()
    path_note = (f"; [local] model_path is served as {cfg.path_alias}" if cfg.model_path
                 else "; any other GGUF file is served through [local] model_path")
    raise ModelUnavailable(f"no local model is called {name!r}: the catalog has {', '.join(CATALOG)}{path_note}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """A child process serving one GGUF model over the OpenAI-compatible HTTP API."""

    def __init__(self, cfg: LocalServerConfig, log_dir: Path, model: str | None = None):
        """``model``: a catalog model's name (or key, or alias) or the ``[local] model_path`` file's name; None: the
        configuration's default. Nothing is read or started here."""
        self.cfg = cfg
        served = resolve_local_model(cfg, model)
        self.catalog: LocalModel | None = None
        self._given_path = Path()
        if isinstance(served, LocalModel):
            self.catalog, self.alias = served, served.name
        else:
            self._given_path, self.alias = served, served.name.removesuffix(".gguf")
        self.prepared: Prepared | None = None
        self.threads: int | None = None
        self.threads_reason: str | None = None
        self.start_s: float | None = None
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.restarts = 0
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{self.alias}.ctx{cfg.ctx}x{cfg.parallel}.log"  # one per server of the pool
        self._lock = threading.RLock()

    @property
    def model_path(self) -> Path:
        """The served file (for a catalog model that needs joining: where it is or will be)."""
        if self.prepared is not None:
            return Path(self.prepared.path)
        return served_path(self.catalog) if self.catalog else self._given_path

    def description(self) -> str:
        """"Qwen2.5-Coder-0.5B-Instruct · 0.5B · Q4_K_M · 469 MiB"; a GGUF by path: its name and size."""
        if self.catalog:
            return self.catalog.describe()
        size = self.prepared.size if self.prepared else None
        return f"{self.alias} · GGUF by path" + (f" · {round(size / 2**20)} MiB" if size else "")

    def prepare(self) -> Prepared:
        """Make the model file ready (join once, verify, check GGUF) and check it fits in the memory available."""
        prepared = prepare_model(self.catalog) if self.catalog else check_gguf_file(self.model_path)
        if self.cfg.check_memory:
            estimate = estimate_memory(prepared.size, GGUFInfo.model_validate(prepared.gguf), self.cfg.ctx,
                                       self.cfg.parallel)
            check_memory(self.alias, estimate, self.cfg.ctx, available_memory())
        self.prepared = prepared
        return prepared

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def healthy(self, timeout: float = 2.0) -> bool:
        if not self.running():
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=timeout) as r:
                return r.status == 200
        except OSError:
            return False

    def ensure(self) -> str:
        """Return the base URL of a healthy server, starting or restarting it if needed."""
        with self._lock:
            if self.running():
                return self.base_url
            if self.proc is not None:
                self.restarts += 1
            self._start()
            return self.base_url

    def _start(self) -> None:
        began = time.perf_counter()
        prepared = self.prepare()
        self.threads, self.threads_reason = resolve_threads(self.cfg.threads)
        log.info("local model %s: %s", self.alias, self.threads_reason)
        self.port = free_port()
        cmd = [sys.executable, "-m", "backends.llama_serve", "--model", prepared.path, "--port", str(self.port),
               "--alias", self.alias, "--ctx", str(self.cfg.ctx), "--parallel", str(self.cfg.parallel),
               "--threads", str(self.threads)]
        with self.log_path.open("ab") as out:
            self.proc = _spawn(cmd, out)
        deadline = time.monotonic() + self.cfg.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EndpointUnavailable(f"local model server exited at start (code {self.proc.returncode}); "
                                          f"see {self.log_path}: {self._log_tail()}")
            if self.healthy(timeout=1.0):
                self.started_at = time.time()
                self.start_s = round(time.perf_counter() - began, 2)
                log.info("local model %s ready on port %s in %.1f s (%s threads)", self.alias, self.port, self.start_s,
                         self.threads)
                return
            time.sleep(0.1)
        self.stop()
        raise EndpointUnavailable(f"local model server not ready after {self.cfg.startup_timeout:.0f} s; see {self.log_path}")

    def _log_tail(self, n: int = 300) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:].strip()
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        with self._lock:
            proc, self.proc = self.proc, None
            if proc is None or proc.poll() is not None:
                return
            proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def status(self) -> dict[str, object]:
        return {
            "running": self.running(),
            "healthy": self.healthy() if self.running() else False,
            "pid": self.proc.pid if self.running() and self.proc else None,
            "port": self.port,
            "model": self.alias,
            "description": self.description(),
            "model_path": str(self.model_path),
            "verified": (f"sha256 {self.prepared.sha256[:12]}… as published" if self.prepared and self.prepared.sha256
                         else "GGUF header checked" if self.prepared else "checked at start"),
            "threads": self.threads,
            "threads_reason": self.threads_reason or (f"{self.cfg.threads} (chosen at start)"
                                                      if self.cfg.threads == "auto" else None),
            "start_s": self.start_s,
            "uptime_s": round(time.time() - self.started_at, 1) if self.started_at and self.running() else None,
            "restarts": self.restarts,
        }


_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-server-spawner")


def _spawn(cmd: list[str], out: IO[bytes]) -> subprocess.Popen:
    """Start a server process from one thread that lives as long as this process. Why: the server exits when its
    parent dies (``PR_SET_PDEATHSIG`` in :mod:`backends.llama_serve`), and Linux sends that signal when the *thread*
    that started the child ends — a server started from a fan-out worker (an H²Memory stage's calls) died with
    that worker, and every stage restarted it, losing its prompt cache and the calls in flight."""
    return _SPAWNER.submit(subprocess.Popen, cmd, cwd=PROJECT_ROOT, stdout=out, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL).result()


class LocalServers:
    """The local model servers of one workspace, one per served model and configuration (created, not started)."""

    def __init__(self, log_dir: Path, threads: int | None = None):
        """``threads`` overrides every configuration's thread count: a pool on a machine whose other cores are
        busy (a test worker beside another) decodes faster on one thread than on two that wait for each other."""
        self.log_dir = log_dir
        self.threads = threads
        self._servers: dict[str, LocalServer] = {}
        self._lock = threading.Lock()
        atexit.register(self.stop_all)

    def get(self, cfg: LocalServerConfig, model: str | None = None) -> LocalServer:
        """The server of ``model`` (a local role's ``model``; None: the configuration's default) under ``cfg``;
        :class:`~backends.model_files.ModelUnavailable` for a name that is neither in the catalog nor the
        ``[local] model_path`` file."""
        if self.threads is not None:
            cfg = cfg.model_copy(update={"threads": self.threads})
        served = resolve_local_model(cfg, model)
        key = f"{served.name if isinstance(served, LocalModel) else served}|{cfg.model_dump_json()}"
        with self._lock:
            if key not in self._servers:
                self._servers[key] = LocalServer(cfg, self.log_dir, model)
            return self._servers[key]

    def running(self) -> list[LocalServer]:
        return [s for s in list(self._servers.values()) if s.running()]

    def stop_all(self) -> None:
        for server in list(self._servers.values()):
            server.stop()
