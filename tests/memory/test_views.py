"""The store's parsed memory views: read once per revision of a build, read again after every kind of change."""

from __future__ import annotations

import pytest

from memory.store import MemoryStore
from memory.types import Changes, MemoryItem
from memory.views import ViewCache


def _item(item_id: str, text: str, session: int = 0) -> MemoryItem:
    return MemoryItem(id=item_id, layer="note", text=text, session_id=f"s{session}", session_index=session)


@pytest.fixture
def store(memory_ws) -> MemoryStore:
    return memory_ws.memory


@pytest.fixture
def build(store) -> str:
    build_id = store.open_build("ds", "u1", "vanilla", {})
    store.commit_stage(build_id, 0, "s0", Changes(upserts=[_item("a", "likes tea"), _item("b", "runs at dawn")]))
    return build_id


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The stored items parsed since the test began (one entry per item)."""
    seen: list[str] = []
    original = MemoryItem.model_validate_json

    def counted(data, *args, **kwargs):
        seen.append(data)
        return original(data, *args, **kwargs)

    monkeypatch.setattr(MemoryItem, "model_validate_json", counted)
    return seen


def _texts(store: MemoryStore, build_id: str, stage: int) -> dict[str, str]:
    items, _ = store.view_as_of(build_id, stage)
    return {i.id: i.text for i in items}


def test_a_view_is_parsed_once_while_the_build_is_unchanged(store, build, parses):
    store._views = ViewCache()  # as another process holding none of it
    first = store.view_as_of(build, 0)
    assert store.view_as_of(build, 0) == first
    assert len(parses) == 2  # its two items, once
    assert _texts(store, build, 0) == {i.id: i.text for i in store.items_as_of(build, 0)}


def test_a_committed_stage_is_seen_by_the_views_it_changes(store, build, parses):
    assert _texts(store, build, 1) == {"a": "likes tea", "b": "runs at dawn"}
    store.commit_stage(build, 1, "s0", Changes(upserts=[_item("a", "likes green tea")], deletes=["b"]))
    assert _texts(store, build, 1) == {"a": "likes green tea"}
    assert _texts(store, build, 0) == {"a": "likes tea", "b": "runs at dawn"}  # an earlier stage keeps its memory


def test_a_stage_that_only_deletes_is_seen(store, build):
    assert set(_texts(store, build, 1)) == {"a", "b"}
    store.commit_stage(build, 1, "s0", Changes(deletes=["b"]))
    assert set(_texts(store, build, 1)) == {"a"}


def test_a_forget_and_an_edit_are_seen(store, build):
    assert set(_texts(store, build, 0)) == {"a", "b"}
    store.forget(build, {"b"}, "asked")
    items, hidden = store.view_as_of(build, 0)
    assert [i.id for i in items] == ["a"] and hidden == {"b"}
    store.edit(build, "a", "likes coffee")
    assert _texts(store, build, 0) == {"a": "likes coffee"}


def test_rows_added_behind_the_store_are_seen(store, build, memory_ws):
    """An import (or a Ray driver persisting a unit's rows) only inserts rows: the revision moves with them."""
    assert set(_texts(store, build, 0)) == {"a", "b"}
    with memory_ws.db.write() as conn:
        conn.execute("INSERT INTO memory_items VALUES (?, ?, 1, 'note', 0, NULL, ?)",
                     (build, "c", _item("c", "has a cat").model_dump_json()))
    assert _texts(store, build, 0)["c"] == "has a cat"


def test_views_of_each_build_and_stage_are_their_own_and_bounded(store, build, parses):
    other = store.open_build("ds", "u2", "vanilla", {})
    store.commit_stage(other, 0, "s0", Changes(upserts=[_item("z", "plays chess")]))
    assert set(_texts(store, other, 0)) == {"z"} and set(_texts(store, build, 0)) == {"a", "b"}
    store._views = ViewCache(size=1)
    parses.clear()
    store.view_as_of(build, 0)
    store.view_as_of(build, 0)  # kept
    store.view_as_of(other, 0)  # pushes the first out
    store.view_as_of(build, 0)  # read again
    assert len(parses) == 2 + 1 + 2
    assert len(store._views._kept) == 1


def test_a_committed_stage_follows_from_the_view_before_it_as_a_read_gives_it(store, memory_ws, parses):
    """A build reads the memory before each stage: the commit works it out from the stage's changes (deleted,
    changed, unchanged, deleted and added again, forgotten), equal to a fresh read, with no stored item parsed
    again."""
    build_id = store.open_build("ds", "u3", "vanilla", {})
    stages = [Changes(upserts=[_item("c", "cooks"), _item("a", "likes tea"), _item("b", "runs")]),
              Changes(upserts=[_item("a", "likes green tea", 1), _item("d", "reads", 1)], deletes=["b"]),
              Changes(upserts=[_item("c", "cooks"), _item("d", "reads novels", 2), _item("e", "swims", 2)],
                      deletes=["d"]),
              Changes(deletes=["a"])]
    for index, changes in enumerate(stages):
        if index == 2:
            store.forget(build_id, {"c"}, "asked")
        if index > 0:
            store.view_as_of(build_id, index - 1)  # what the build reads before the stage
        parses.clear()
        store.commit_stage(build_id, index, f"s{index // 2}", changes)
        committed = len(parses)
        items, hidden = store.view_as_of(build_id, index)
        assert len(parses) == committed  # worked out, not read
        fresh = MemoryStore(memory_ws.db)
        assert [i.model_dump() for i in items] == [i.model_dump() for i in fresh.items_as_of(build_id, index)]
        assert hidden == fresh.forgotten(build_id)
        for earlier in range(index):  # the stages before are still served, and still right
            assert store.view_as_of(build_id, earlier) == fresh.view_as_of(build_id, earlier)


def test_a_builders_view_is_its_own_copy(build_memory, tiny_user):
    builder, _ = build_memory("full-history", tiny_user, [])
    builder.run(until_session=0)
    view = builder.view(0)
    view.items.clear()
    view.forgotten.add("x")
    again = builder.view(0)
    assert again.items and "x" not in again.forgotten


def test_a_sessions_logs_are_rendered_once_per_session_object(tiny_user):
    from memory.base import render_log, rendered_logs

    session = tiny_user.sessions[0]
    first = rendered_logs(tiny_user, session)
    assert first == [render_log(session, j) for j in range(len(session.logs))]
    assert rendered_logs(tiny_user, session) is first
    changed = session.model_copy(update={"logs": [session.logs[0].model_copy(update={"content": "bought a kettle"})]})
    assert rendered_logs(tiny_user, changed) == [render_log(changed, 0)]  # another session object: rendered afresh
    assert "bought a kettle" in render_log(changed, 0)
