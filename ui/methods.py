"""What every page shares about memory methods: the methods offered (and why some are not), their labels, and
the builder of a user's memory — the workspace's, so the Memory, Simulate and Evaluate pages show the same build.
"""

from __future__ import annotations

import streamlit as st

from memory.build import MemoryBuilder
from memory.methods import get_method_class, method_availability
from palset.dataset import Dataset, User, dataset_key
from ui.platform_state import llm_client, workspace

PREFERRED_METHODS = ("h2memory", "rag-turn")
NO_BUILD_PREFERRED = ("rag-turn", "vanilla-log")  # a simulation's default: memory ready without the LLM
NO_COMPARE = "—"  # the "compare with" choice that compares with nothing
FRESH = "mem_fresh_builds"  # (dataset, user, method) a person asked to rebuild with the current settings


def available_methods() -> list[str]:
    """Registered methods that import in this install (see :func:`unavailable_methods` for the others)."""
    return [name for name, reason in method_availability().items() if reason is None]


def unavailable_methods() -> dict[str, str]:
    """Methods that fail to import, with the reason (shown, never silently dropped)."""
    return {name: reason for name, reason in method_availability().items() if reason is not None}


def default_method(methods: list[str]) -> str:
    return next((m for m in PREFERRED_METHODS if m in methods), methods[0])


def default_simulation_method(methods: list[str]) -> str:
    """What a new simulation opens on: a method whose memory needs no LLM build (a simulation with H²Memory
    first builds the user's memory with the LLM, minutes on the bundled model), preferring retrieval."""
    no_build = [m for m in methods if not get_method_class(m).uses_llm]
    return next((m for m in NO_BUILD_PREFERRED if m in no_build), no_build[0] if no_build else default_method(methods))


def method_label(name: str) -> str:
    return f"{get_method_class(name).label} ({name})"


def open_builder(dataset: Dataset, user_id: str, method: str, build_id: str | None = None) -> MemoryBuilder:
    """The workspace's builder of this method for this user (see :meth:`Workspace.open_user_builder` for which
    build), with this browser session's client; a fresh build when a person asked for one here.

    Raises :class:`ConfigError` when the configuration is broken, ``KeyError`` for an unknown user or build,
    :class:`~backends.store.db.ReadOnlyError` when presenting a bundle without that memory. ``build_id``: a
    particular stored build (see :mod:`ui.memory.builds`).
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
