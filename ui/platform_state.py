"""Per-browser-session access to the platform: config with this session's overrides, the LLM client, totals."""

from __future__ import annotations

import uuid
from typing import Any

import streamlit as st

from backends.config import ConfigError, PlatformConfig, config_fingerprint, load_config
from backends.llm.client import LLMClient
from backends.store.runstore import RunStore

OVERRIDES_KEY = "llm_overrides"


def session_id() -> str:
    return st.session_state.setdefault("pal_session_id", uuid.uuid4().hex[:12])


def overrides() -> dict[str, dict[str, Any]]:
    return st.session_state.setdefault(OVERRIDES_KEY, {})


def platform_config() -> PlatformConfig:
    """Secrets + environment + this session's overrides; raises :class:`ConfigError` with a clear message."""
    return load_config(overrides=overrides())


def llm_client() -> LLMClient:
    """One client per browser session, rebuilt when the session's overrides change (a changed key included)."""
    cfg = platform_config()
    fingerprint = config_fingerprint(cfg)
    cached = st.session_state.get("_llm_client")
    if cached is None or st.session_state.get("_llm_client_fp") != fingerprint:
        cached = LLMClient(cfg, session_id=session_id())
        st.session_state["_llm_client"] = cached
        st.session_state["_llm_client_fp"] = fingerprint
    return cached


def session_cost(cfg: PlatformConfig, store: RunStore, sid: str | None) -> tuple[int, int, int, float]:
    """(calls, tokens in, tokens out, estimated cost in USD) for a session, or for all time when ``sid`` is None."""
    totals = store.totals(sid)
    cost = sum(cfg.cost(model, tin, tout) for model, (tin, tout) in totals.by_model.items())
    return totals.calls, totals.tokens_in, totals.tokens_out, cost


def config_error_message() -> str | None:
    try:
        platform_config()
    except ConfigError as e:
        return str(e)
    return None
