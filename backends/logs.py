"""Logging, configured once per process: PAL Studio's own loggers write to ``PAL_HOME/logs/pal.log``.

Every module logs through ``logging.getLogger(__name__)``. :func:`configure_logging` (called by the
composition root) sets our packages' level from ``PAL_LOG_LEVEL`` (default ``INFO``), writes them to a
rotating file under the workspace's home, and sends warnings and errors to stderr as well.
Third-party libraries keep their own (quieter) levels. Calling it again with another folder moves the
file handler there (tests give every workspace its own home).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import threading
from pathlib import Path

PACKAGES = ("backends", "palset", "memory", "sim", "evaluation", "review", "synth", "studio", "ui", "cli", "jobs",
            "protocol")
LOG_FILE = "pal.log"
FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"

_lock = threading.Lock()
_state: dict[str, logging.Handler] = {}


def level_from_env(env: dict[str, str] | None = None) -> int:
    """``PAL_LOG_LEVEL`` (a name like ``DEBUG`` or a number); an unknown value falls back to INFO."""
    value = (env if env is not None else os.environ).get("PAL_LOG_LEVEL", "INFO").strip().upper()
    if value.isdigit():
        return int(value)
    level = logging.getLevelName(value)
    return level if isinstance(level, int) else logging.INFO


def configure_logging(log_dir: Path, level: int | None = None) -> Path:
    """Point our loggers at ``log_dir/pal.log`` (created) and stderr; returns the log file's path."""
    level = level_from_env() if level is None else level
    path = log_dir / LOG_FILE
    with _lock:
        current = _state.get("file")
        if not isinstance(current, logging.FileHandler) or Path(current.baseFilename) != path.resolve():
            log_dir.mkdir(parents=True, exist_ok=True)
            handler = logging.handlers.RotatingFileHandler(path, maxBytes=10_000_000, backupCount=3, encoding="utf-8")
            handler.setFormatter(logging.Formatter(FORMAT))
            _swap("file", handler)
        if "stderr" not in _state:
            console = logging.StreamHandler()
            console.setLevel(logging.WARNING)
            console.setFormatter(logging.Formatter(FORMAT))
            _swap("stderr", console)
        for name in PACKAGES:
            logging.getLogger(name).setLevel(level)
    return path


def current_log_file() -> Path | None:
    """The file our loggers write to now (None before :func:`configure_logging`)."""
    handler = _state.get("file")
    return Path(handler.baseFilename) if isinstance(handler, logging.FileHandler) else None


def _swap(kind: str, handler: logging.Handler) -> None:
    old = _state.get(kind)
    for name in PACKAGES:
        pkg = logging.getLogger(name)
        if old is not None:
            pkg.removeHandler(old)
        pkg.addHandler(handler)
        pkg.propagate = True  # pytest's caplog and Streamlit's own handlers still see our records
    if old is not None:
        old.close()
    _state[kind] = handler
