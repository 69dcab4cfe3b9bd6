"""What the Memory page's parts share: the build runner with its progress display, the URL-synced widget keys
(the methods offered and the builder of the shown memory are every page's: :mod:`ui.methods`).
"""

from __future__ import annotations

import logging
import uuid

import streamlit as st

from memory.build import MemoryBuilder
from memory.methods import get_method_class
from memory.store import dialogue_stage, logs_stage
from palset.dataset import Dataset
from ui.platform_state import base_workspace, llm_client
from ui.text import error_text, md_escape
from ui.url_state import UrlState

GRAPH_HEIGHT = 640
KEYS = {"user": "mem_user", "method": "mem_method", "session": "mem_session", "tab": "mem_tab",
        "item": "mem_item", "compare": "mem_compare", "topic": "mem_topic", "purpose": "mem_purpose"}
URL = UrlState(KEYS, "mem")

log = logging.getLogger(__name__)


def run_build(builder: MemoryBuilder, until_session: int | None = None) -> bool:
    """Run (or resume) the build as a job of the app's engine — one unit per session, in time order — and
    follow it with a live progress bar (the build goes on if the page is closed); errors become a message."""
    from protocol.units import build_units
    from ui.jobs import failure_text, follow, submit

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
    summary = follow(job_id, f"Building {builder.method} memory", concurrency=1)  # its sessions build in turn
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
