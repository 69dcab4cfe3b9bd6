"""Per-browser-session access to the platform: the process's workspace, this session's config and client.

The app has one :class:`studio.workspace.Workspace` per ``PAL_HOME`` (kept by ``st.cache_resource``);
each browser session sees it under its own configuration (Settings overrides) through
:func:`workspace`, and gets one LLM client through :func:`llm_client`.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Any

import streamlit as st

from backends.config import ConfigError, CostEstimate, PlatformConfig, config_fingerprint, load_config
from backends.llm.client import LLMClient
from backends.paths import default_home
from backends.store.runstore import RunStore
from studio.workspace import Workspace

log = logging.getLogger(__name__)

OVERRIDES_KEY = "llm_overrides"
JOB_WORKERS = int(os.environ.get("PAL_JOB_WORKERS", "4"))


def _release(ws: Workspace) -> None:
    ws.jobs.stop(timeout=2)


@st.cache_resource(max_entries=4, show_spinner=False, on_release=_release)
def _process_workspace(home: str) -> Workspace:
    """One workspace per home for the whole process (every browser session shares its stores).

    A broken configuration does not stop the records from opening: the sidebar shows the error, and
    :func:`workspace` (what LLM work uses) raises it."""
    try:
        config = load_config()
    except ConfigError as e:
        log.warning("configuration error (records still open with the defaults): %s", e)
        config = load_config(secrets={}, env={})
    ws = Workspace(home=Path(home), config=config)
    ws.jobs.start(JOB_WORKERS)  # units of app jobs run in this process whether or not a page is open
    return ws


def session_id() -> str:
    return st.session_state.setdefault("pal_session_id", uuid.uuid4().hex[:12])


def overrides() -> dict[str, dict[str, Any]]:
    return st.session_state.setdefault(OVERRIDES_KEY, {})


def platform_config() -> PlatformConfig:
    """Secrets + environment + this session's overrides; raises :class:`ConfigError` with a clear message."""
    return load_config(overrides=overrides())


def workspace() -> Workspace:
    """The process's workspace under this session's configuration (raises :class:`ConfigError`)."""
    return _process_workspace(str(default_home())).with_config(platform_config())


def base_workspace() -> Workspace:
    """The process's workspace for reading and writing records (needs no valid LLM configuration)."""
    return _process_workspace(str(default_home()))


def llm_client() -> LLMClient:
    """One client per browser session, rebuilt when the session's overrides change (a changed key included)."""
    ws = workspace()
    fingerprint = config_fingerprint(ws.config) + str(ws.home)
    cached = st.session_state.get("_llm_client")
    if cached is None or st.session_state.get("_llm_client_fp") != fingerprint:
        cached = ws.llm(session_id=session_id())
        st.session_state["_llm_client"] = cached
        st.session_state["_llm_client_fp"] = fingerprint
    return cached


def session_cost(cfg: PlatformConfig, store: RunStore, sid: str | None) -> tuple[int, int, int, CostEstimate]:
    """(calls, tokens in, tokens out, estimated cost) for a session, or for all time when ``sid`` is None."""
    totals = store.totals(sid)
    return totals.calls, totals.tokens_in, totals.tokens_out, cfg.estimate(totals.by_model)


def config_error_message() -> str | None:
    try:
        platform_config()
    except ConfigError as e:
        return str(e)
    return None
