"""ARCHITECTURE.md's "how to add a memory method", followed once with a trivial method; a method that fails to
import is listed as unavailable with its reason, not silently dropped."""

from __future__ import annotations

import pytest

from memory.base import MemoryMethod, log_ref, render_log
from memory.methods import METHODS, method_availability
from memory.types import Changes, MemoryItem, PromptBlock, RetrievedItem
from palset.loader import load_dataset
from testkit.workspace import make_workspace
from tests.conftest import DEMO


class LastLogs(MemoryMethod):
    """Step 1: a subclass with name, label, layers, description; ingest and retrieve."""

    name = "last-logs"
    label = "Last logs (recipe test)"
    layers = ("log",)
    description = "Remembers every session's last log."

    def ingest_logs(self, session, memory):
        j = len(session.logs) - 1
        item = MemoryItem(id=f"last:{session.sample_id}", layer="log", text=render_log(session, j),
                          session_id=session.sample_id, session_index=session.index, provenance=[log_ref(session, j)])
        changes = Changes(upserts=[item])
        self.honour_forget_requests(session, memory, changes)
        return changes

    def retrieve(self, query, purpose, memory, current):
        items = sorted(memory.layer("log"), key=lambda i: i.session_index)
        retrieved = [RetrievedItem(item=i, score=1.0) for i in items]
        return self.trace(query, purpose, current, retrieved,
                          [PromptBlock(title="Last logs", text="\n".join(i.text for i in items))])


@pytest.fixture
def registered(monkeypatch):
    """Step 2: the registry entry."""
    monkeypatch.setitem(METHODS, "last-logs", f"{__name__}:LastLogs")
    method_availability.cache_clear()
    yield
    method_availability.cache_clear()


def test_a_new_method_builds_and_retrieves_through_the_workspace(tmp_path, registered):
    ws = make_workspace(tmp_path, env={"PAL_EMBEDDER": "hash"})
    ds = load_dataset(DEMO)
    builder = ws.open_builder(ds, "1000", "last-logs")
    info = builder.run()
    user = ds.users["1000"]
    assert info.stages_done == 2 * len(user.sessions) and info.llm_calls == 0
    query = user.query[0]
    trace = builder.retrieve(query.topics[0].topic.user_query, "requirement", query)
    assert [i.item.session_id for i in trace.items] == [s.sample_id for s in user.sessions if s.index <= query.index]
    assert trace.blocks[0].title == "Last logs" and trace.tokens > 0
    assert method_availability()["last-logs"] is None


def test_a_method_that_fails_to_import_is_unavailable_with_its_reason(monkeypatch, caplog):
    monkeypatch.setitem(METHODS, "broken", "memory.methods.no_such_module:Nothing")
    method_availability.cache_clear()
    try:
        reason = method_availability()["broken"]
    finally:
        method_availability.cache_clear()
    assert reason is not None and "no_such_module" in reason
    assert any("broken" in r.getMessage() and r.exc_info for r in caplog.records)
