"""Workspaces for tests and benches: a temporary home, a configuration from given layers only, fake providers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from backends.config import load_config
from backends.llm.local_server import LocalServers
from studio.workspace import Workspace


def make_workspace(home: Path, providers: Mapping[str, Any] | None = None, *,
                   secrets: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                   overrides: Mapping[str, Mapping[str, Any]] | None = None,
                   servers: LocalServers | None = None) -> Workspace:
    """A workspace over ``home`` whose config comes from ``secrets``/``env``/``overrides`` only (never the
    developer's own secrets or environment); ``providers`` (role → provider) answer those roles; ``servers``
    shares the test session's local model server (one per test worker)."""
    config = load_config(secrets=dict(secrets or {}), env=dict(env or {}), overrides=overrides)
    return Workspace(home, config, providers=dict(providers or {}), servers=servers)
