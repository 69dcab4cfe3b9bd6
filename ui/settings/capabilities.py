"""Settings: what each endpoint + model was found to support — the structured mode negotiated (and why),
the context window and where it was read, streaming, seed, reasoning — with a way to negotiate again."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from backends.store.capabilities import Capabilities, CapabilityStore
from ui.text import md_escape


def _yes_no(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def capabilities_frame(rows: list[Capabilities]) -> pd.DataFrame:
    """One row per endpoint + model (pure: unit-tested)."""
    return pd.DataFrame([{
        "endpoint": c.endpoint, "model": c.model, "structured mode": c.structured_mode or "—",
        "why": c.structured_note or "", "window": c.context_window, "window from": c.window_source or "",
        "modes that work": ", ".join(m for m, v in c.modes.items() if v == "ok") or "—",
        "streaming": _yes_no(c.streaming), "seed honoured": _yes_no(c.seed_honoured),
        "reasoning": _yes_no(c.emits_reasoning),
        "checked": time.strftime("%Y-%m-%d %H:%M", time.localtime(c.checked_at)) if c.checked_at else "—",
    } for c in rows], columns=["endpoint", "model", "structured mode", "why", "window", "window from",
                               "modes that work", "streaming", "seed honoured", "reasoning", "checked"])


def render_capabilities(store: CapabilityStore) -> None:
    st.subheader("Endpoint capabilities")
    rows = store.all()
    if not rows:
        st.caption("Nothing learned yet: the first structured call to an endpoint negotiates its structured mode, "
                   "and Test connection (or `pal llm check`) probes the rest.")
        return
    st.caption("Learned per endpoint and model: a structured mode an endpoint refuses is stepped down "
               "(json_schema → json_schema_strict → json_object → prompt) and remembered here.")
    st.dataframe(capabilities_frame(rows), hide_index=True, width="stretch", key="settings_capabilities")
    labels = {f"{c.model} @ {c.endpoint}": c for c in rows}
    c1, c2 = st.columns([3, 1])
    chosen = c1.selectbox("Endpoint", list(labels), key="settings_caps_pick", label_visibility="collapsed")
    if c2.button("Negotiate again", key="settings_caps_forget", help="Forget what was learned about this endpoint"):
        caps = labels[chosen]
        store.forget(caps.endpoint, caps.model)
        st.success(f"Forgot {md_escape(chosen)}: the next structured call negotiates again.")
        st.rerun()
