"""The frame around every page: who is signed in, the active dataset in the sidebar, status of what loaded.

What the sidebar offers follows the role: annotators pick a dataset only; researchers and admins also
open folders (inside ``PAL_DATA_ROOTS``) and see the backends.
"""

from __future__ import annotations

import logging
from pathlib import Path

import streamlit as st

from backends.roots import OutsideRoots, inside_roots
from palset.dataset import Dataset
from palset.files import MISSING_MEANS
from review.access import auth_mode
from review.accounts import Account
from ui.datasets import DEFAULT_DATASET, folder_signature, load, name_for_path
from ui.platform_state import known_dataset_paths
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)


@st.cache_resource(max_entries=8, show_spinner="Loading dataset…")
def _cached_dataset(path: str, signature: tuple) -> Dataset:
    return load(Path(path))


def active_dataset_name() -> str:
    name = st.query_params.get("dataset", DEFAULT_DATASET)
    return name if name in known_dataset_paths() else DEFAULT_DATASET


def active_dataset() -> Dataset:
    """The dataset named by ``?dataset=`` (default: the bundled demo), loaded once per file change."""
    path = known_dataset_paths()[active_dataset_name()]
    return _cached_dataset(str(path), folder_signature(path))


def _switch_dataset(name: str) -> None:
    st.query_params.clear()
    if name != DEFAULT_DATASET:
        st.query_params["dataset"] = name


def _add_folder() -> None:
    raw = st.session_state.get("dataset_path_input", "").strip()
    if not raw:
        return
    try:
        path = inside_roots(raw)
    except OutsideRoots as e:
        st.session_state["dataset_path_error"] = str(e)
        return
    if not path.is_dir():
        st.session_state["dataset_path_error"] = f"{raw} is not a folder"
        return
    st.session_state.pop("dataset_path_error", None)
    added = st.session_state.setdefault("added_datasets", {})
    name = name_for_path(path, known_dataset_paths())
    added[name] = path
    _switch_dataset(name)


def render_identity(account: Account) -> None:
    """Who is signed in, and Sign out (accounts mode only: the local admin has nothing to sign out of)."""
    from ui.access import sign_out

    if auth_mode() == "local":
        return
    st.caption(f"Signed in as **{md_escape(account.name)}** · {account.role}")
    st.button("Sign out", key="auth_logout", icon=":material/logout:", on_click=sign_out)
    st.divider()


def render_sidebar(dataset: Dataset, account: Account) -> None:
    """Identity, dataset picker and a one-glance status of the loaded dataset (what the role may see)."""
    with st.sidebar:
        render_identity(account)
        st.subheader("Dataset")
        names = list(known_dataset_paths())
        current = active_dataset_name()
        if current != st.session_state.get("_url_dataset") or st.session_state.get("dataset_choice") not in names:
            # the URL changed (a link inside the app, back/forward): it wins over the picker's last value
            st.session_state["dataset_choice"] = st.session_state["_url_dataset"] = current
        choice = st.selectbox("Active dataset", names, key="dataset_choice")
        if choice != current:
            st.session_state["_url_dataset"] = choice
            _switch_dataset(choice)
            st.rerun()
        if account.is_annotator:
            return
        with st.expander("Open a folder in PAL-Set layout"):
            st.text_input("Folder path", key="dataset_path_input", placeholder="/path/to/PAL-Set/data_en")
            st.button("Open", on_click=_add_folder)
            if err := st.session_state.get("dataset_path_error"):
                st.error(md_escape(err))
        n_sessions = sum(u.counts.sessions for u in dataset.users.values())
        st.caption(f"{len(dataset.users)} users · {n_sessions} sessions · language {dataset.language}")
        if dataset.is_partial and dataset.users:
            st.warning("Partial release: profiles and preferences only.", icon=":material/info:")
        if dataset.missing and dataset.users:
            with st.expander(f"{len(dataset.missing)} release file(s) absent"):
                for name in dataset.missing:
                    st.markdown(f"- **{md_escape(name)}**: {MISSING_MEANS[name]}")
        errors = dataset.errors
        if errors:
            with st.expander(f":red[{len(errors)} problem(s) in the data]"):
                st.code("\n".join(str(p) for p in errors[:200]), language=None)
        if not all(u.sessions_loaded for u in dataset.users.values()):
            st.caption("Sessions are checked as users are opened; `pal validate` checks everything at once.")
        st.divider()
        from ui.platform_state import presenting
        from ui.presenting import provenance_lines, render_present_panel

        render_present_panel()
        if presenting():
            st.subheader("Records")
            st.caption("\n".join(f"- {line}" for line in provenance_lines()))
        else:
            render_backends(dataset)


def render_backends(dataset: Dataset) -> None:
    """Compact view of the LLM roles, local server and this session's usage."""
    from backends.config import ROLES, ConfigError
    from backends.embeddings import resolve_name
    from backends.llm.errors import EndpointUnavailable
    from ui.platform_state import home_workspace, llm_client, platform_config, session_cost, session_id

    st.subheader("Backends")
    try:
        cfg = platform_config()
    except ConfigError as e:
        st.error(f"Configuration error: {e}")  # built by backends.config from configuration: names, no payloads
        return
    lines = []
    for role in ROLES:
        rc = cfg.role(role)
        lines.append(f"- {role}: {rc.provider} · {md_escape(rc.model)}")
    st.caption("\n".join(lines))
    if any(cfg.role(r).provider == "local" for r in ROLES):
        try:
            status = home_workspace().servers.get(cfg.local).status()
            state = "healthy" if status["healthy"] else ("starting" if status["running"] else "starts on first use")
        except EndpointUnavailable as e:
            log.warning("local model unavailable: %s", e)
            state = f"unavailable: {md_escape(e)}"
        st.caption(f"Local model: {state}")
    st.caption(f"Embedder: {md_escape(resolve_name(cfg.embedder.name, dataset.language))}")
    try:
        calls, tin, tout, cost = session_cost(cfg, llm_client().store, session_id())
        st.caption(f"This session: {calls} LLM calls · {tin + tout:,} tokens · {md_escape(cost.label())}")
    except Exception as e:  # a broken run store must not take the page down
        log.exception("usage totals unavailable")
        st.caption(f"Usage unavailable: {md_escape(error_text(e))}")


def require_router() -> None:
    """Make sure a page runs inside ``app.py``'s navigation.

    Streamlit keeps a legacy mode for apps with a ``pages/`` folder: it may run a page file on its
    own (a first visit to a deep link on a fresh server; every AppTest run), without the app's
    frame and with widget state that does not survive. Then run ``app.py`` itself, whose
    ``st.navigation`` switches the legacy mode off and renders this same page, and stop.
    """
    import runpy

    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        runpy.run_path(str(Path(__file__).resolve().parent.parent / "app.py"), run_name="__main__")
        st.stop()
