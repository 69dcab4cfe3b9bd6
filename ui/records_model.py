"""When the records a page shows were made by another model than the one configured for this session, say which
and offer it: a page that continues the records (judging the demo's runs, simulating beside them) with a smaller
model would quietly mix two instruments.

The recorded model of a role is the one that made most of that role's calls in the run store
(:meth:`backends.store.runstore.RunStore.models_used`); the offer sets this browser session's override of those
roles (as the Settings page does, audited), only for a local catalog model that is installed here — otherwise it
names how to install it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import streamlit as st
from pydantic import BaseModel, ConfigDict

from backends.config import PlatformConfig
from backends.llm.errors import EndpointUnavailable
from backends.local_models import canonical_name, find_model
from backends.model_files import install_hint, part_files
from ui.text import md_escape

log = logging.getLogger(__name__)


class ModelMismatch(BaseModel):
    """A role whose records were made by another model than the configured one."""

    model_config = ConfigDict(extra="forbid")
    role: str
    configured: str
    recorded: str
    provider: str  # the recorded calls' provider
    calls: int
    installed: bool  # a local catalog model whose files are here (it can be offered)
    hint: str = ""  # how to install it, when it is not


def recorded_models(used: Sequence[tuple[str, str, str, str, int]]) -> dict[str, tuple[str, str, int]]:
    """Role → (provider, model, calls) of the model that made most of the role's recorded calls."""
    out: dict[str, tuple[str, str, int]] = {}
    for role, provider, _endpoint, model, n in used:
        if role not in out or n > out[role][2]:
            out[role] = (provider, model, n)
    return out


def model_installed(name: str) -> tuple[bool, str]:
    """(installed, how to install) for a local catalog model; (False, "") for any other model."""
    model = find_model(name)
    if model is None:
        return False, ""
    try:
        part_files(model)
    except EndpointUnavailable as e:
        log.info("recorded model %s is not installed: %s", name, e)
        return False, install_hint(model)
    return True, ""


def mismatches(used: Sequence[tuple[str, str, str, str, int]], cfg: PlatformConfig, roles: Iterable[str]
               ) -> list[ModelMismatch]:
    """The roles (of ``roles``) whose recorded model is not the configured one."""
    recorded = recorded_models(used)
    out = []
    for role in roles:
        if role not in recorded or role not in cfg.roles:
            continue
        provider, model, n = recorded[role]
        configured = cfg.role(role).model or ""
        if canonical_name(model) == canonical_name(configured):
            continue
        installed, hint = model_installed(model) if provider == "local" else (False, "")
        out.append(ModelMismatch(role=role, configured=configured, recorded=model, provider=provider, calls=n,
                                 installed=installed, hint=hint))
    return out


def notice_text(found: Sequence[ModelMismatch]) -> str:
    """One sentence per recorded model (markdown, values escaped)."""
    by_model: dict[str, list[ModelMismatch]] = {}
    for m in found:
        by_model.setdefault(m.recorded, []).append(m)
    lines = []
    for model, ms in by_model.items():
        roles = ", ".join(m.role.replace("_", " ") for m in ms)
        calls = sum(m.calls for m in ms)
        configured = ", ".join(sorted({md_escape(m.configured) for m in ms}))
        lines.append(f"The records here were made by **{md_escape(model)}** ({roles}: {calls:,} calls); this session "
                     f"is configured with **{configured}**, so new work would not match them.")
    return "  \n".join(lines)


def render_records_model(used: Sequence[tuple[str, str, str, str, int]], cfg: PlatformConfig, roles: Sequence[str],
                         key: str, *, may_change: bool) -> list[ModelMismatch]:
    """Say which model made the records when it is not the configured one, and offer it for this session."""
    found = mismatches(used, cfg, roles)
    if not found:
        return []
    st.info(notice_text(found), icon=":material/info:")
    offer = [m for m in found if m.installed]
    if offer and may_change:
        models = sorted({m.recorded for m in offer})
        if st.button(f"Use {', '.join(models)} for this session", key=f"{key}_use_recorded",
                     icon=":material/swap_horiz:"):
            use_recorded(offer)
            st.rerun()
    for m in found:
        if not m.installed and m.hint:
            st.caption(f"{md_escape(m.recorded)} is not installed here: {md_escape(m.hint)}")
    return found


def use_recorded(found: Sequence[ModelMismatch]) -> None:
    """This session's override: each role on its recorded local model (audited like a Settings override)."""
    from ui.access import actor_name
    from ui.platform_state import home_workspace, overrides

    for m in found:
        overrides()[m.role] = {**overrides().get(m.role, {}), "provider": "local", "model": m.recorded}
        home_workspace().audit.record(actor_name(), "settings.override", m.role, fields=["model", "provider"],
                                      key_entered=False, base_url=None, provider="local", model=m.recorded)
