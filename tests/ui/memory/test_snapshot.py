"""The Memory page's item view: what a gold item derives rather than reads, and what it withholds, is said under it;
its profile provenance shows the profile's sentence."""

from __future__ import annotations

from memory.methods.gold import gold_stages
from ui.memory.snapshot import origin_notes, provenance_frame


def test_gold_items_say_what_is_derived_and_withheld(demo_user):
    stages = gold_stages(demo_user)
    last = stages[-1]
    outline = next(i for i in last.values() if i.layer == "topic_outline")
    notes = origin_notes(outline)
    assert notes and all("derived (not annotation)" in n for n in notes) and notes[0].startswith("Solutions:")
    query = demo_user.query[0]
    situation = next(i for i in last.values() if i.layer == "situation" and i.session_id == query.sample_id)
    assert any(n.startswith("Withheld: query session") for n in origin_notes(situation))
    history = next(i for i in last.values() if i.layer == "situation" and i.session_id == demo_user.history[0].sample_id)
    assert origin_notes(history) == []
    background = last[f"{demo_user.uid}_background_work"]
    frame = provenance_frame(demo_user, background, last)
    assert list(frame["source"]) == ["profile:occupation"] and frame["text"].iloc[0] == demo_user.profile.occupation


def test_the_items_list_searches_text_ids_and_sources_and_filters_by_layer_and_session():
    from memory.types import MemoryItem
    from ui.memory.snapshot import filter_items, items_frame, provenance_summary

    def item(id_, layer, sid, text, prov=()):
        return MemoryItem(id=id_, layer=layer, text=text, session_id=sid, session_index=0, provenance=list(prov))

    items = [item("a", "situation", "s1", "Knee pain after running", ["log:s1:0", "log:s1:1", "turn:s1:2"]),
             item("b", "background", "s2", "膝盖疼，跑步后加重", ["item:a"]),
             item("c", "situation", "s2", "Busy week")]
    assert [i.id for i in filter_items(items, "KNEE")] == ["a"]
    assert [i.id for i in filter_items(items, "膝盖")] == ["b"]
    assert [i.id for i in filter_items(items, "item:a")] == ["b"]  # a source
    assert [i.id for i in filter_items(items, layers=["situation"], sessions=["s2"])] == ["c"]
    assert filter_items(items) == items
    assert provenance_summary(items[0]) == "2 logs · 1 turn" and provenance_summary(items[2]) == "—"
    assert list(items_frame(items).columns)[:3] == ["layer", "session", "text"]  # what a reader scans first
