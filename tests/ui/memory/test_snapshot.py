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
