"""Settings: how many calls each role's endpoint may have in flight together, and where that number comes from.

A researcher who points a role at vLLM or a hosted API without configuring ``[limits]`` sees here that its calls
go out several at once (the default), the server's own slot count where it says one, and how often it answered
429 (each halves the number until calls succeed again).
"""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from backends.config import ROLES, mask_url
from backends.llm.client import LLMClient
from backends.llm.limits import DEFAULT_CONCURRENCY, Width

log = logging.getLogger(__name__)

SOURCES = {"configured": "[limits] in secrets.toml or the experiment",
           "server slots": "the server's slot count (llama.cpp /props, the bundled server's parallel)",
           "default": f"default for an endpoint nobody configured ({DEFAULT_CONCURRENCY}, halved on 429)",
           "none": "in-process provider: one at a time"}


def widths_frame(widths: dict[str, Width]) -> pd.DataFrame:
    """One row per endpoint (the roles using it joined), its width now, ceiling, source and 429s."""
    by_endpoint: dict[str, tuple[list[str], Width]] = {}
    for role, width in widths.items():
        by_endpoint.setdefault(width.endpoint, ([], width))[0].append(role)
    return pd.DataFrame([{"endpoint": mask_url(endpoint) or endpoint, "roles": ", ".join(roles),
                          "in flight together": w.width, "ceiling": w.ceiling or "none",
                          "from": SOURCES[w.source], "429s": w.rate_limited}
                         for endpoint, (roles, w) in by_endpoint.items()])


def role_widths(llm: LLMClient) -> dict[str, Width]:
    """Every role's width; a role whose provider cannot be built is left out (and logged)."""
    out: dict[str, Width] = {}
    for role in ROLES:
        try:
            out[role] = llm.describe_width(role)
        except Exception as e:  # a misconfigured role must not hide the others' widths
            log.warning("width of role %s: %s", role, e, exc_info=True)
    return out


def render_widths(llm: LLMClient) -> None:
    st.subheader("Calls in flight per endpoint")
    st.caption("Independent calls (a judgment's samples, a memory stage's windows) go out together up to this "
               "width; a 429 halves it and each success adds one back, up to the ceiling.")
    st.dataframe(widths_frame(role_widths(llm)), hide_index=True, width="stretch", key="settings_widths")
