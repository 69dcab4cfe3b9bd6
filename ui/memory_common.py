"""What the Memory page's parts share: the methods offered, cached embedders/vector stores/builders, the
build runner with its progress display, the URL-synced widget keys.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import streamlit as st

from backends.embeddings import get_embedder
from backends.paths import state_path
from backends.vectorstore import ChromaStore
from memory.build import MemoryBuilder
from memory.methods import METHODS, get_method_class
from memory.store import MemoryStore, dialogue_stage, logs_stage
from palset.dataset import User
from ui.platform_state import llm_client, platform_config
from ui.text import md_escape
from ui.url_state import UrlState

PREFERRED_METHODS = ("h2memory", "rag-turn")
NO_COMPARE = "—"
GRAPH_HEIGHT = 640
KEYS = {"user": "mem_user", "method": "mem_method", "session": "mem_session", "tab": "mem_tab",
        "item": "mem_item", "compare": "mem_compare", "topic": "mem_topic", "purpose": "mem_purpose"}
URL = UrlState(KEYS, "mem")


def available_methods() -> list[str]:
    """Registered methods that import in this install (a method still being written is left out)."""
    out = []
    for name, target in METHODS.items():
        if importlib.util.find_spec(target.split(":")[0]) is None:
            continue
        try:
            get_method_class(name)
        except Exception:  # noqa: BLE001 - a broken method must not take the page down
            continue
        out.append(name)
    return out


def default_method(methods: list[str]) -> str:
    return next((m for m in PREFERRED_METHODS if m in methods), methods[0])


def method_label(name: str) -> str:
    return f"{get_method_class(name).label} ({name})"


@st.cache_resource(max_entries=4, show_spinner="Loading the embedder…")
def _embedder(name: str, language: str):
    return get_embedder(name, language)


@st.cache_resource(max_entries=4, show_spinner=False)
def _vectors(embedder_name: str, language: str, path: str) -> ChromaStore:
    """One Chroma client per embedder and ``PAL_HOME`` (tests give each run its own home)."""
    return ChromaStore(_embedder(embedder_name, language), Path(path))


def open_builder(dataset: str, user: User, method: str) -> MemoryBuilder:
    """The stored build of this method for this user (same config and embedder), or a new one.

    Raises :class:`ConfigError` when the configuration is broken.
    """
    store = MemoryStore()
    cfg = platform_config()
    embedder_name, config = cfg.embedder.name, {}
    fresh = st.session_state.setdefault("mem_fresh_builds", set())
    stored = store.find_build(dataset, user.uid, method)
    if stored and (dataset, user.uid, method) not in fresh:
        config = {k: v for k, v in store.info(stored).config.items() if k != "embedder"}
        embedder_name = store.info(stored).config.get("embedder", embedder_name)
    llm = llm_client() if get_method_class(method).uses_llm else None
    vectors = _vectors(embedder_name, user.language, str(state_path("chroma", "db")))
    return MemoryBuilder(dataset, user, method, store, vectors, vectors.embedder, llm, config)


def run_build(builder: MemoryBuilder, until_session: int | None = None) -> bool:
    """Run (or resume) the build with a live progress bar; errors become a message, never a traceback."""
    with st.status(f"Building {builder.method} memory…", expanded=True) as status:
        bar = st.progress(0.0)

        def progress(done: int, total: int, what: str) -> None:
            bar.progress(min(done / max(total, 1), 1.0), text=f"{done}/{total} stages")
            st.write(f"{md_escape(what)} done")

        try:
            info = builder.run(until_session=until_session, progress=progress)
        except Exception as e:  # noqa: BLE001 - LLMError, invalid output, vector store: all shown as a message
            status.update(label="Build stopped", state="error")
            st.session_state["mem_build_error"] = f"Build stopped: {md_escape(error_text(e))}. " \
                                                  "Finished stages are kept; press Resume to continue."
            st.error(st.session_state["mem_build_error"])
            return False
        status.update(label=f"Built {info.stages_done} stages", state="complete")
    return True


def error_text(e: Exception) -> str:
    from backends.llm.errors import LLMError

    return str(e) if isinstance(e, LLMError) else f"{type(e).__name__}: {e}"


def snapshot_stage(builder: MemoryBuilder, pos: int) -> int:
    """After session ``pos``'s dialogue when that stage is done, else after its logs."""
    done = set(builder.store.done_stages(builder.build_id))
    return dialogue_stage(pos) if dialogue_stage(pos) in done else logs_stage(pos)
