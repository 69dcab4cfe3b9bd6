"""What the Memory page's parts share: the methods offered, the builder of the shown memory (the
workspace's, so every page uses the same build), the build runner with its progress display, the URL-synced
widget keys.
"""

from __future__ import annotations

import logging
import uuid

import streamlit as st

from memory.build import MemoryBuilder
from memory.methods import get_method_class, method_availability
from memory.store import dialogue_stage, logs_stage
from palset.dataset import Dataset, User, dataset_key
from ui.platform_state import base_workspace, llm_client, workspace
from ui.text import error_text, md_escape
from ui.url_state import UrlState

PREFERRED_METHODS = ("h2memory", "rag-turn")
NO_COMPARE = "—"
GRAPH_HEIGHT = 640
KEYS = {"user": "mem_user", "method": "mem_method", "session": "mem_session", "tab": "mem_tab",
        "item": "mem_item", "compare": "mem_compare", "topic": "mem_topic", "purpose": "mem_purpose"}
URL = UrlState(KEYS, "mem")
FRESH = "mem_fresh_builds"  # (dataset, user, method) a person asked to rebuild with the current settings

log = logging.getLogger(__name__)


def available_methods() -> list[str]:
    """Registered methods that import in this install (see :func:`unavailable_methods` for the others)."""
    return [name for name, reason in method_availability().items() if reason is None]


def unavailable_methods() -> dict[str, str]:
    """Methods that fail to import, with the reason (shown, never silently dropped)."""
    return {name: reason for name, reason in method_availability().items() if reason is not None}


def default_method(methods: list[str]) -> str:
    return next((m for m in PREFERRED_METHODS if m in methods), methods[0])


def method_label(name: str) -> str:
    return f"{get_method_class(name).label} ({name})"


def open_builder(dataset: Dataset, user_id: str, method: str, build_id: str | None = None) -> MemoryBuilder:
    """The workspace's builder of this method for this user (see :meth:`Workspace.open_user_builder` for which
    build), with this browser session's client; a fresh build when a person asked for one here.

    Raises :class:`ConfigError` when the configuration is broken, ``KeyError`` for an unknown user or build,
    :class:`~backends.store.db.ReadOnlyError` when presenting a bundle without that memory. ``build_id``: a
    particular stored build (see :mod:`ui.memory_builds`).
    """
    if user_id not in dataset.users:
        raise KeyError(f"no user {user_id!r} in {dataset.root}")
    return open_user_builder(dataset_key(dataset.root), dataset.users[user_id], method, build_id)


def open_user_builder(dkey: str, user: User, method: str, build_id: str | None = None) -> MemoryBuilder:
    """:func:`open_builder` for a dataset known by its key (another method's builder of the same user)."""
    from ui.platform_state import presenting

    fresh = (dkey, user.uid, method) in st.session_state.setdefault(FRESH, set())
    llm = llm_client() if get_method_class(method).uses_llm and not presenting() else None
    with st.spinner("Opening the memory…"):
        return workspace().open_user_builder(dkey, user, method, llm=llm, fresh=fresh, build_id=build_id)


def run_build(builder: MemoryBuilder, until_session: int | None = None) -> bool:
    """Run (or resume) the build as a job of the app's engine — one unit per session, in time order — and
    follow it with a live progress bar (the build goes on if the page is closed); errors become a message."""
    from protocol.units import build_units
    from ui.jobs_view import failure_text, follow, submit

    config = {k: v for k, v in builder.config.items() if k != "embedder"}
    try:
        units = build_units(_dataset_of(builder), builder.user.uid, builder.method, until_session, config,
                            builder.config.get("embedder"))
        job_id = submit("memory", f"memory {builder.method} for user {builder.user.uid}", units,
                        job_id=f"memory-{builder.build_id}-{uuid.uuid4().hex[:6]}",
                        llm=llm_client() if get_method_class(builder.method).uses_llm else None)
    except Exception as e:  # configuration or dataset problems: a message
        log.exception("memory build %s cannot start", builder.build_id)
        st.session_state["mem_build_error"] = f"Build stopped: {md_escape(error_text(e))}."
        return False
    summary = follow(job_id, f"Building {builder.method} memory")
    if summary.status != "done":
        log.warning("memory build %s stopped: %s", builder.build_id, summary.errors)
        st.session_state["mem_build_error"] = f"Build stopped: {md_escape(failure_text(summary))}. " \
                                              "Finished stages are kept; press Resume to continue."
        st.error(st.session_state["mem_build_error"])
        return False
    return True


def _dataset_of(builder: MemoryBuilder) -> Dataset:
    """The loaded dataset whose key the build has (the sidebar's; its folder is the key)."""
    return base_workspace().dataset(builder.dataset)


def snapshot_stage(builder: MemoryBuilder, pos: int) -> int:
    """After session ``pos``'s dialogue when that stage is done, else after its logs."""
    done = set(builder.store.done_stages(builder.build_id))
    return dialogue_stage(pos) if dialogue_stage(pos) in done else logs_stage(pos)
