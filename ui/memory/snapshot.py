"""The Memory page's Snapshot tab: a searchable, filterable list of the items first (layer, session, text,
provenance), then the memory graph focused on the selected item and that item's detail with its provenance
resolved to the real logs/turns, and edit/forget.

All text from data goes through :func:`ui.text.md_escape`, a dataframe cell, ``st.code`` or ``st.json``;
the graph escapes it itself (see :mod:`ui.memory.graph`).
"""

from __future__ import annotations

import functools
import hashlib
from datetime import datetime

import pandas as pd
import streamlit as st

from memory.build import MemoryBuilder
from memory.types import MemoryItem
from palset.dataset import User
from ui.memory import graph as mg
from ui.memory.common import KEYS, URL, snapshot_stage
from ui.platform_state import home_workspace
from ui.text import clip, md_escape, md_inline

GRAPH_PX = 760
FOCUS_FROM = 40  # items: above this the graph opens focused on the selected item


def render_snapshot(builder: MemoryBuilder, pos: int) -> None:
    stage = snapshot_stage(builder, pos)
    items = builder.store.items_as_of(builder.build_id, stage)
    if not items:
        st.info(f"{builder.method} keeps no memory items: it builds its prompt from the current session only.")
        return
    render_items_table(builder, items, pos)
    ids = [i.id for i in items]
    URL.sync("item", ids, most_linked(items))  # the selection the graph focuses on (the detail shows it too)
    render_graph(builder, items, stage)  # the page's whole width: a 100-node build needs it
    render_detail(builder, items)


def most_linked(items: list[MemoryItem]) -> str:
    """The item with the most sources and members (a principle, a topic outline): the first selection, so a
    focused graph opens on a neighbourhood worth reading rather than on an item with no links."""
    return max(items, key=lambda i: (len(mg.item_refs(i)), len(i.provenance), i.importance)).id


def _layer_options(items: list[MemoryItem], expanded: bool) -> list[str]:
    layers = list(dict.fromkeys(i.layer for i in items))
    sources = [mg.USER_LAYER, mg.SESSION_LAYER] + ([mg.LOG_LAYER] if any(_log_refs(i) for i in items) else [])
    return layers + sources + ([mg.TURN_LAYER] if expanded else [])


def _log_refs(item: MemoryItem) -> list[str]:
    return [p for p in item.provenance if p.startswith("log:")]


def render_graph(builder: MemoryBuilder, items: list[MemoryItem], stage: int) -> None:
    """Layer toggles, which items to open up to their logs, and the graph itself."""
    expandable = [i.id for i in sorted(items, key=lambda i: i.layer != "situation")
                  if any(p.startswith(("log:", "turn:")) for p in i.provenance)]
    text_of = {i.id: i.text for i in items}
    expand = st.multiselect("Show the logs and turns of", expandable, key=f"mem_expand_{builder.build_id}_{stage}",
                            format_func=lambda i: f"{i} · {clip(text_of[i], 40)}",
                            placeholder="situations and other items (logs are grouped by default)")
    selected = st.session_state.get(KEYS["item"])
    c1, c2 = st.columns([3, 2])
    focus = c1.toggle("Focus on the selected item", value=len(items) > FOCUS_FROM, key=f"mem_focus_{builder.build_id}",
                      help="Only the selected item and what it is linked to (its sources, members, session).",
                      disabled=selected is None)
    hops = c2.segmented_control("Links away", [1, 2, 3], default=1, key=f"mem_hops_{builder.build_id}",
                                disabled=not focus) or 1
    options = _layer_options(items, bool(expand))
    counts = {layer: sum(1 for i in items if i.layer == layer) for layer in options}
    digest = hashlib.sha1("|".join(options).encode()).hexdigest()[:8]
    shown = st.pills("Layers", options, selection_mode="multi", default=options, key=f"mem_layers_{builder.method}_{digest}",
                     format_func=lambda layer: f"{md_inline(layer)} ({counts[layer]})" if counts[layer] else md_inline(layer))
    centre = selected if focus and selected in {i.id for i in items} else None
    html = graph_html(_fingerprint(builder.build_id, stage, items), items, builder.user, tuple(sorted(expand)),
                      tuple(sorted(shown)), centre, int(hops))
    st.iframe(html, height=GRAPH_PX)
    st.caption("Labels are the items' own text; hover a node for all of it. Drag to pan, scroll or pinch to zoom. "
               "Select an item in the list above (or below) to focus the graph on it.")


def _fingerprint(build_id: str, stage: int, items: list[MemoryItem]) -> str:
    h = hashlib.sha1(f"{build_id}:{stage}".encode())
    for item in items:
        h.update(item.model_dump_json().encode())
    return h.hexdigest()


@st.cache_data(max_entries=32, show_spinner="Laying out the graph…")
def graph_html(fingerprint: str, _items: list[MemoryItem], _user: User, expand: tuple[str, ...],
               layers: tuple[str, ...], focus: str | None = None, hops: int = 1) -> str:
    """The graph page for one snapshot and view settings (``fingerprint`` stands for the items)."""
    graph = mg.build_memory_graph(_items, _user, set(expand), set(layers), focus=focus, hops=hops)
    return mg.render_pyvis_html(graph, height=GRAPH_PX)


def render_detail(builder: MemoryBuilder, items: list[MemoryItem]) -> None:
    """One item: text, layer, origin, provenance resolved to the actual logs and turns, meta, edit, forget."""
    by_id = {i.id: i for i in items}
    ids = list(by_id)
    URL.sync("item", ids, most_linked(items))
    item_id = st.selectbox("Item", ids, key=KEYS["item"], format_func=lambda i: f"{i} · {by_id[i].layer}")
    URL.write("item")
    item = by_id[item_id]
    if message := st.session_state.pop("mem_detail_message", None):
        st.success(message)
    st.markdown(f":blue-badge[{md_escape(item.layer)}] :gray[created at session {md_escape(item.session_id)} "
                f"· importance {item.importance:g}]")
    with st.container(height=180, border=True):
        st.markdown(md_escape(item.text))
    for note in origin_notes(item):
        st.caption(md_escape(note))
    st.markdown("**Provenance**")
    frame = provenance_frame(builder.user, item, by_id)
    if frame.empty:
        st.caption("No sources recorded.")
    else:
        st.dataframe(frame, hide_index=True, width="stretch", column_config={
            "text": st.column_config.TextColumn("text", width="large")})
    if item.meta:
        with st.expander("Meta"):
            st.json(item.meta)
    _edit_and_forget(builder, item)


def origin_notes(item: MemoryItem) -> list[str]:
    """What a gold item derives rather than reads from the annotations, and what it withholds (shown under it)."""
    derived = item.meta.get("derived")
    notes = [f"{part.capitalize()}: {text}" for part, text in derived.items()] if isinstance(derived, dict) else []
    if isinstance(item.meta.get("withheld"), str):
        notes.append(f"Withheld: {item.meta['withheld']}")
    return notes


def provenance_frame(user: User, item: MemoryItem, snapshot: dict[str, MemoryItem]) -> pd.DataFrame:
    """One row per source: the log line, the dialogue turn or the remembered item it points to."""
    rows = []
    for ref in item.provenance:
        kind, target, num = mg.parse_ref(ref)
        if kind == "log" and num is not None:
            text = mg.log_text(user, target, num)
        elif kind == "turn" and num is not None:
            text = mg.turn_text(user, target, num)
        elif kind == "item":
            text = snapshot[target].text if target in snapshot else "(not in this snapshot)"
        elif kind == "profile" and user.profile is not None:
            text = str(getattr(user.profile, target, ""))
        else:
            text = ""
        rows.append({"source": ref, "text": text})
    return pd.DataFrame(rows, columns=["source", "text"])


def _edit_and_forget(builder: MemoryBuilder, item: MemoryItem) -> None:
    """Edit (the previous text stays as a version) and Forget, both recorded in the audit log."""
    from ui.access import actor_name
    from ui.presenting import read_only_note, writes_allowed

    if not writes_allowed():
        read_only_note("items are not edited or forgotten here")
        return

    with st.expander("Edit"):
        text = st.text_area("Text", value=item.text, key=f"mem_edit_{builder.build_id}_{item.id}", height=140)
        if st.button("Save", key="mem_save", icon=":material/save:", disabled=text == item.text):
            who = actor_name()
            builder.edit(item.id, text, editor=who)
            home_workspace().audit.record(who, "memory.edit", f"{builder.build_id}/{item.id}",
                                                  previous_chars=len(item.text), new_chars=len(text))
            st.session_state["mem_detail_message"] = f"Saved the new text of {md_escape(item.id)}."
            st.rerun()
        history = builder.store.edit_history(builder.build_id, item.id)
        if history:
            st.caption(f"Earlier texts ({len(history)} edit(s)), oldest first:")
            st.dataframe(pd.DataFrame([{"edited": datetime.fromtimestamp(h["edited_at"]).strftime("%Y-%m-%d %H:%M"),
                                        "by": h["editor"], "previous text": h["previous_text"]} for h in history]),
                         hide_index=True, key=f"mem_history_{item.id}")
    if st.button("Forget", key="mem_forget", icon=":material/delete:",
                 help="Hides this item and every item derived from it, in every snapshot and every retrieval."):
        gone = builder.forget({item.id})
        home_workspace().audit.record(actor_name(), "memory.forget", f"{builder.build_id}/{item.id}",
                                              forgotten=sorted(gone))
        st.session_state["mem_detail_message"] = (f"Forgot {md_escape(item.id)} and {len(gone) - 1} derived "
                                                  f"item(s).")
        st.rerun()


def provenance_summary(item: MemoryItem) -> str:
    """"3 logs · 1 turn · 2 items" — what an item was made from, at a glance."""
    kinds: dict[str, int] = {}
    for ref in item.provenance:
        kind = mg.parse_ref(ref)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    return " · ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in kinds.items()) or "—"


def items_frame(items: list[MemoryItem]) -> pd.DataFrame:
    return pd.DataFrame([{"layer": i.layer, "session": i.session_id, "text": i.text,
                          "provenance": provenance_summary(i), "importance": i.importance, "id": i.id}
                         for i in items],
                        columns=["layer", "session", "text", "provenance", "importance", "id"])


def filter_items(items: list[MemoryItem], text: str = "", layers: list[str] | None = None,
                 sessions: list[str] | None = None) -> list[MemoryItem]:
    """The items whose text, id or provenance contains ``text`` (any case), of those layers and sessions."""
    needle = text.strip().lower()
    return [i for i in items
            if (not layers or i.layer in layers) and (not sessions or i.session_id in sessions)
            and (not needle or needle in f"{i.text}\n{i.id}\n{' '.join(i.provenance)}".lower())]


def _select_row(ids: list[str]) -> None:
    """Items list callback: a selected row opens that item in the detail panel and focuses the graph on it."""
    rows = (st.session_state.get("mem_items_table") or {}).get("selection", {}).get("rows", [])
    if rows and rows[0] < len(ids):
        st.session_state[KEYS["item"]] = ids[rows[0]]


def render_items_table(builder: MemoryBuilder, items: list[MemoryItem], pos: int) -> None:
    """The items first: search and filter by layer and session; a selected row is the item shown below."""
    st.subheader(f"Items ({len(items)})")
    c1, c2, c3 = st.columns([3, 2, 2])
    text = c1.text_input("Search the items", key="mem_items_q", placeholder="words in the text, an id, a source")
    layers = c2.multiselect("Layer", list(dict.fromkeys(i.layer for i in items)), key="mem_items_layers")
    sessions = c3.multiselect("Session", list(dict.fromkeys(i.session_id for i in items)), key="mem_items_sessions")
    shown = filter_items(items, text, layers, sessions)
    if len(shown) != len(items):
        st.caption(f"{len(shown)} of {len(items)} items match.")
    ids = [i.id for i in shown]
    st.dataframe(items_frame(shown), hide_index=True, width="stretch", key="mem_items_table", height=320,
                 on_select=functools.partial(_select_row, ids), selection_mode="single-row",
                 column_config={"text": st.column_config.TextColumn("text", width="large")})
    sample_id = builder.user.sessions[pos].sample_id
    st.download_button("Export this snapshot (JSONL)", "\n".join(i.model_dump_json() for i in items),
                       file_name=f"{builder.build_id}-{sample_id}.jsonl", mime="application/jsonl",
                       icon=":material/download:", key="mem_export_items")
