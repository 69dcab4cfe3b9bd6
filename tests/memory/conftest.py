"""Shared fixtures for memory-method tests: a tiny filler user, the demo user, and builders over a scripted LLM."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from backends.config import ROLES
from backends.embeddings import HashEmbedder
from backends.llm.fake import ScriptedLLM
from backends.llm.types import ChatRequest
from backends.vectorstore import BruteForceStore
from memory.build import MemoryBuilder
from palset.loader import load_dataset
from testkit.workspace import make_workspace


@pytest.fixture
def pal_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return tmp_path / "pal"


@pytest.fixture
def tiny_user(tmp_path):
    """One filler user: 4 sessions (3 history, 1 query), 10 logs and 8 turns each, ~82 days apart."""
    from testkit.release import make_release

    root = make_release(tmp_path / "ds", users=1, sessions=4, logs_per_session=10, turns=8, query_sessions=1)
    return next(iter(load_dataset(root).users.values()))


@pytest.fixture
def memory_ws(pal_home):
    """The workspace over the temporary PAL_HOME (configuration: defaults only)."""
    return make_workspace(pal_home)


@pytest.fixture
def build_memory(memory_ws):
    """``build_memory(method, user, reply, config=None)`` → (builder, fake): a MemoryBuilder over a scripted LLM
    (the hash embedder and an in-memory vector store: fakes for unit tests)."""

    def make(method: str, user, reply: Callable[[ChatRequest], str] | list, config: dict | None = None,
             dataset: str = "ds") -> tuple[MemoryBuilder, ScriptedLLM]:
        fake = ScriptedLLM(reply)
        client = memory_ws.llm(session_id="test", providers=dict.fromkeys(ROLES, fake))
        embedder = HashEmbedder()
        builder = MemoryBuilder(dataset, user, method, memory_ws.memory, BruteForceStore(embedder), embedder,
                                llm=client, config=config or {}, files_root=memory_ws.paths.method_files)
        return builder, fake

    return make
