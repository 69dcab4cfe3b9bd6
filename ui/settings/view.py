"""Settings page (admins): each role's endpoint and model, session overrides, connection tests, embedder,
local server, costs.

An override that changes a role's provider or base URL does not keep the configured key (see
:mod:`backends.config`): the key for that endpoint is entered with it. URLs are shown with their
credentials masked. Every override, reset and local-server start/stop is recorded in the audit log.
"""

from __future__ import annotations

import logging
import time

import pandas as pd
import streamlit as st

from backends.config import ROLE_OUTPUT_TOKENS, ROLES, ConfigError, PlatformConfig, mask_url
from backends.csvsafe import frame_to_csv
from backends.embeddings import resolve_name
from backends.llm.check import check_role
from backends.llm.errors import EndpointUnavailable
from ui.access import actor_name
from ui.platform_state import (
    home_workspace,
    llm_client,
    overrides,
    platform_config,
    session_cost,
    session_id,
    workspace,
)
from ui.settings.capabilities import render_capabilities
from ui.settings.widths import render_widths
from ui.text import md_escape

PROVIDERS = ["local", "openai"]
STRUCTURED_MODES = ["json_schema", "json_schema_strict", "json_object", "prompt"]
THINKING = ["default", "off"]

log = logging.getLogger(__name__)


def render_settings(dataset_language: str) -> None:
    st.title("Settings")
    try:
        cfg = platform_config()
    except ConfigError as e:
        st.error(f"Configuration error: {e}")  # built by backends.config from configuration: names, no payloads
        if st.button("Clear this session's overrides"):
            overrides().clear()
            st.rerun()
        return
    _render_roles(cfg)
    render_capabilities(llm_client().store.capabilities)
    render_widths(llm_client())
    _render_local_server(cfg)
    _render_embedder(cfg, dataset_language)
    _render_costs(cfg)


def roles_frame(cfg: PlatformConfig) -> pd.DataFrame:
    """One row per role; the key column says only whether a key is set."""
    rows = []
    for role in ROLES:
        pub = cfg.role(role).public()
        rows.append({"role": role, "provider": pub["provider"], "endpoint": pub["base_url"] or ("bundled" if pub["provider"] == "local" else "api.openai.com"),
                     "model": pub["model"], "temperature": pub["temperature"],
                     "max_tokens": pub["max_tokens"] or f"auto (≤ {ROLE_OUTPUT_TOKENS.get(role, 512):,})",
                     "timeout_s": pub["timeout"] or "from speed", "idle_s": pub["idle_timeout"], "api_key": "set" if pub["api_key_set"] else "—",
                     "window": f"{pub['context_window']:,}" if pub["context_window"] else "from endpoint",
                     "structured": pub["structured_mode"], "thinking": pub["thinking"],
                     "overridden": role in overrides()})
    return pd.DataFrame(rows)


def _render_roles(cfg: PlatformConfig) -> None:
    st.subheader("LLM roles")
    st.caption("From .streamlit/secrets.toml and PAL_* environment variables; changes here last for this browser session only.")
    st.dataframe(roles_frame(cfg), hide_index=True, width="stretch")
    for role in ROLES:
        rc = cfg.role(role)
        with st.expander(f"{role} · {rc.provider} · {md_escape(rc.model)}"):
            with st.form(f"form_{role}"):
                c1, c2, c3 = st.columns(3)
                provider = c1.selectbox("Provider", PROVIDERS, index=PROVIDERS.index(rc.provider) if rc.provider in PROVIDERS else 0,
                                        key=f"set_{role}_provider")
                shown_url = mask_url(rc.base_url) or ""
                base_url = c2.text_input("Base URL", value=shown_url, placeholder="https://…/v1", key=f"set_{role}_base_url")
                model = c3.text_input("Model", value=rc.model, key=f"set_{role}_model")
                c4, c5, c6, c7 = st.columns(4)
                temperature = c4.number_input("Temperature", 0.0, 2.0, float(rc.temperature), 0.1)
                max_tokens = c5.number_input("Max tokens", 0, 32768, int(rc.max_tokens or 0),
                                             help=f"0: the role's own budget ({ROLE_OUTPUT_TOKENS.get(role, 512):,} "
                                                  "tokens), at most its share of the endpoint's window")
                timeout = c6.number_input("Timeout (s)", 0.0, 3600.0, float(rc.timeout or 0),
                                          help="Seconds for a whole answer; 0: what each call needs at the "
                                               "endpoint's measured speed")
                api_key = c7.text_input("API key", type="password", placeholder="unchanged" if rc.api_key else "none",
                                        key=f"set_{role}_api_key",
                                        help="Another provider or base URL never uses the configured key: enter "
                                             "the key for that endpoint here.")
                c8, c9, c10, c11 = st.columns(4)
                window = c8.number_input("Context window", 0, 10_000_000, int(rc.context_window or 0), 1024,
                                         help="Tokens per request; 0: read from the endpoint (vLLM, llama.cpp)")
                mode = c9.selectbox("Structured mode", STRUCTURED_MODES, index=STRUCTURED_MODES.index(rc.structured_mode),
                                    help="Tried first; an endpoint that refuses it is stepped down")
                tokenizer = c10.text_input("Tokenizer", value=rc.tokenizer or "", placeholder="best known",
                                           help="Hugging Face name or path (offline), tiktoken:<encoding>, endpoint")
                thinking = c11.selectbox("Thinking", THINKING, index=THINKING.index(rc.thinking),
                                         help="off: send the vendor's switch that turns a reasoning model's thinking off")
                if st.form_submit_button("Apply for this session", key=f"set_{role}_apply"):
                    url = rc.base_url if base_url == shown_url else (base_url or None)
                    apply_override(role, {"provider": provider, "base_url": url, "model": model,
                                          "temperature": temperature, "max_tokens": int(max_tokens) or None, "timeout": timeout or None,
                                          "context_window": int(window) or None, "structured_mode": mode,
                                          "tokenizer": tokenizer or None, "thinking": thinking},
                                   api_key)
                    st.rerun()
            b1, b2 = st.columns(2)
            if b1.button("Test connection", key=f"test_{role}", icon=":material/network_check:"):
                with st.spinner(f"Checking {role}…"):
                    report = check_role(llm_client(), role)
                st.session_state[f"check_{role}"] = report
            if role in overrides() and b2.button("Reset to configured", key=f"reset_{role}"):
                overrides().pop(role, None)
                home_workspace().audit.record(actor_name(), "settings.reset", role)
                st.rerun()
            if report := st.session_state.get(f"check_{role}"):
                (st.success if report.ok else st.error)(md_escape("\n".join(report.lines())))


def apply_override(role: str, new: dict, api_key: str) -> None:
    """Keep this session's override of ``role`` (with its own key when one was typed) and audit what changed."""
    if api_key:
        new["api_key"] = api_key
    before = overrides().get(role, {})
    overrides()[role] = {**before, **new}
    changed = sorted(k for k, v in new.items() if k != "api_key" and before.get(k) != v)
    home_workspace().audit.record(actor_name(), "settings.override", role, fields=changed, key_entered=bool(api_key),
                        base_url=mask_url(new.get("base_url")), provider=new.get("provider"), model=new.get("model"))


def _render_local_server(cfg: PlatformConfig) -> None:
    st.subheader("Local models")
    for model, roles in cfg.local_models().items():
        _render_one_local_server(cfg, model, roles)


def _render_one_local_server(cfg: PlatformConfig, model: str, roles: list[str]) -> None:
    try:
        server = home_workspace().servers.get(cfg.local, model)
    except EndpointUnavailable as e:  # a missing model wheel or an unknown model name is reported, not raised
        log.warning("local model %s unavailable: %s", model, e)
        st.error(md_escape(e))
        return
    status = server.status()
    st.markdown(f"**{md_escape(status['description'])}** · {md_escape(', '.join(roles) or 'no local role')}")
    c1, c2, c3, c4, c5 = st.columns(5)
    c1.metric("Status", "healthy" if status["healthy"] else ("running" if status["running"] else "stopped"))
    c2.metric("Port", status["port"] or "—")
    c3.metric("Uptime (s)", status["uptime_s"] or "—")
    c4.metric("Restarts", status["restarts"])
    c5.metric("Threads", status["threads"] or "auto", help=status["threads_reason"])
    st.caption(f"{md_escape(status['model'])} · {md_escape(status['model_path'])} · {md_escape(status['verified'])} · "
               f"{md_escape(status['threads_reason'] or '')} · starts on first use, stops when the app exits")
    local_checks = [st.session_state.get(f"check_{r}") for r in roles]
    measured = [c for c in local_checks if c is not None and c.tokens_per_s]
    if measured:
        st.caption(f"Last measured speed: {measured[-1].tokens_per_s:.0f} tokens/s (Test connection on a local role)")
    b1, b2 = st.columns(2)
    if b1.button("Start", disabled=bool(status["running"]), icon=":material/play_arrow:", key=f"local_start_{model}"):
        home_workspace().audit.record(actor_name(), "settings.local_server", model, state="start")
        with st.spinner(f"Starting {model}…"):
            try:
                server.ensure()
            except EndpointUnavailable as e:  # a part missing, a wrong sha256, not enough memory: said, not raised
                log.warning("local model %s did not start: %s", model, e)
                st.session_state[f"local_error_{model}"] = str(e)
            else:
                st.session_state.pop(f"local_error_{model}", None)
        st.rerun()
    if b2.button("Stop", disabled=not status["running"], icon=":material/stop:", key=f"local_stop_{model}"):
        home_workspace().audit.record(actor_name(), "settings.local_server", model, state="stop")
        server.stop()
        st.rerun()
    if error := st.session_state.get(f"local_error_{model}"):
        st.error(md_escape(error))


def _render_embedder(cfg: PlatformConfig, language: str) -> None:
    st.subheader("Embedder")
    name = resolve_name(cfg.embedder.name, language)
    st.markdown(f"Configured **{md_escape(cfg.embedder.name)}** → for this dataset ({language}): **{md_escape(name)}**")
    if st.button("Test embedder", icon=":material/science:"):
        with st.spinner(f"Loading {name}…"):
            t0 = time.perf_counter()
            emb = workspace().embedder(cfg.embedder.name, language)
            dims = emb.dim  # loads the model (embedders load on first use)
            load_s = time.perf_counter() - t0
            texts = ["I can't sleep after night shifts", "Insomnia from working nights", "The bakery sells bread"] * 20
            t0 = time.perf_counter()
            vecs = emb.embed_documents(texts)
            rate = len(texts) / (time.perf_counter() - t0)
        sims = vecs[:3] @ vecs[0]
        st.success(f"{md_escape(emb.name)}: {dims} dims, loaded in {load_s:.1f} s, {rate:.0f} sentences/s; "
                   f"paraphrase similarity {sims[1]:.2f} vs unrelated {sims[2]:.2f}")


def _render_costs(cfg: PlatformConfig) -> None:
    st.subheader("Usage")
    client = llm_client()
    for label, sid in (("This browser session", session_id()), ("All sessions", None)):
        calls, tin, tout, cost = session_cost(cfg, client.store, sid)
        st.markdown(f"**{label}**: {calls} calls · {tin:,} tokens in · {tout:,} tokens out · {md_escape(cost.label())}")
    recent = client.store.calls(session_id(), limit=200)
    if recent:
        frame = pd.DataFrame(recent)[["role", "model", "prompt_name", "prompt_version", "tokens_in", "tokens_out",
                                     "reasoning_tokens", "tokens_counter", "prompt_tokens_est", "est_counter",
                                     "max_tokens", "context_window", "structured_mode", "fit_note", "latency_ms",
                                     "cache_hit", "attempts", "error"]]
        st.dataframe(frame, hide_index=True, width="stretch")
        st.download_button("Export calls (CSV)", frame_to_csv(frame), file_name="llm-calls.csv", mime="text/csv")
    if not cfg.prices:
        st.caption("No price table configured ([prices.\"model\"] in secrets.toml): models other than the bundled "
                   "one are shown as unpriced.")
