"""Shared fixtures for memory-method tests: a tiny filler user, the demo user, and builders over a scripted LLM."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from backends.config import ROLES, load_config
from backends.embeddings import HashEmbedder
from backends.llm.client import LLMClient
from backends.llm.fake import ScriptedLLM
from backends.llm.types import ChatRequest
from backends.store.cache import ResponseCache
from backends.store.runstore import RunStore
from backends.vectorstore import BruteForceStore
from memory.build import MemoryBuilder
from memory.store import MemoryStore
from palset.loader import load_dataset
from tests.conftest import DEMO


@pytest.fixture
def pal_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return tmp_path / "pal"


@pytest.fixture
def tiny_user(tmp_path):
    """One filler user: 4 sessions (3 history, 1 query), 10 logs and 8 turns each, ~82 days apart."""
    from bench.fixture import make_release

    root = make_release(tmp_path / "ds", users=1, sessions=4, logs_per_session=10, turns=8, query_sessions=1)
    return next(iter(load_dataset(root).users.values()))


@pytest.fixture(scope="session")
def demo_dataset():
    return load_dataset(DEMO)


@pytest.fixture
def demo_user(demo_dataset):
    """Demo user 1000 (English, 9 sessions); shared, so tests must not change it."""
    return demo_dataset.users["1000"]


def schema_name(req: ChatRequest) -> str:
    """The structured-output model a request asks for (its JSON schema name)."""
    if req.response_format and "json_schema" in req.response_format:
        return req.response_format["json_schema"]["name"]
    m = re.search(r'"title":"(\w+)"}?$', req.messages[0].content)
    return m.group(1) if m else ""


def prompt_text(req: ChatRequest) -> str:
    """The rendered prompt (the first user message; correction turns come after it)."""
    return next(m.content for m in req.messages if m.role == "user")


def section(prompt: str, title: str) -> str:
    """The text of a prompt section "Title:\\n…" up to the next blank line."""
    m = re.search(rf"{re.escape(title)}:\n(.*?)(?:\n\n|\Z)", prompt, re.S)
    return m.group(1) if m else ""


@pytest.fixture
def build_memory(pal_home):
    """``build_memory(method, user, reply, config=None)`` → (builder, fake): a MemoryBuilder over a scripted LLM."""

    def make(method: str, user, reply: Callable[[ChatRequest], str] | list, config: dict | None = None,
             dataset: str = "ds") -> tuple[MemoryBuilder, ScriptedLLM]:
        fake = ScriptedLLM(reply)
        client = LLMClient(load_config(secrets={}, env={}), store=RunStore(pal_home / "runs.sqlite"),
                           cache=ResponseCache(pal_home / "cache.sqlite"), providers=dict.fromkeys(ROLES, fake),
                           session_id="test")
        embedder = HashEmbedder()
        builder = MemoryBuilder(dataset, user, method, MemoryStore(pal_home / "runs.sqlite"),
                                BruteForceStore(embedder), embedder, llm=client, config=config or {})
        return builder, fake

    return make
