"""Rendering of the Memory page: build a user's memory with a method, scrub it session by session,
inspect, edit or forget items, and see what retrieval puts in front of the assistant.

State lives in the URL (``?user=…&method=…&session=…&tab=…&item=…&compare=…``), so any view can be
pasted as a link. All text from data goes through :func:`ui.text.md_escape`, a dataframe cell,
``st.code`` or ``st.json``; the graph escapes it itself (see :mod:`ui.memory_graph`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from pathlib import Path

import pandas as pd
import streamlit as st

from backends.config import ConfigError
from backends.embeddings import get_embedder, resolve_name
from backends.paths import state_path
from backends.vectorstore import ChromaStore
from memory.build import MemoryBuilder
from memory.methods import METHODS, get_method_class
from memory.service import dataset_key
from memory.store import BuildInfo, MemoryStore, SessionDiff, dialogue_stage, logs_stage
from memory.types import MemoryItem, Purpose, RetrievalTrace
from palset.dataset import Dataset, Session, User
from ui import memory_graph as mg
from ui.platform_state import llm_client, platform_config
from ui.text import clip, md_escape
from ui.url_state import UrlState

TABS = ["Snapshot", "Changes", "Retrieval"]
PREFERRED_METHODS = ("h2memory", "rag-turn")
NO_COMPARE = "—"
GRAPH_HEIGHT = 640
_KEYS = {"user": "mem_user", "method": "mem_method", "session": "mem_session", "tab": "mem_tab",
         "item": "mem_item", "compare": "mem_compare"}
_URL = UrlState(_KEYS, "mem")



# ---------------------------------------------------------------- methods, stores, builders


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


# ---------------------------------------------------------------- page


def render_memory(dataset: Dataset) -> None:
    st.title("Memory")
    if not dataset.users:
        st.info("This dataset has no users. Pick another dataset in the sidebar.")
        return
    methods = available_methods()
    user, method = _pick_user_and_method(dataset, methods)
    if not user.sessions:
        st.info("This user has no sessions in this dataset (partial release): there is nothing to remember.")
        return
    try:
        builder = open_builder(dataset_key(dataset.root), user, method)
    except (ConfigError, ValueError) as e:
        st.error(f"Cannot open the memory of {md_escape(user.uid)} with {method}: {md_escape(e)}")
        return
    info = render_build_panel(builder)
    if info.stages_done == 0:
        st.info("Nothing built yet: press **Build** to ingest this user's sessions.")
        return
    pos = _pick_session(builder, info)
    names, renderers = TABS, [render_snapshot, render_changes, lambda b, _p: render_retrieval(b, methods)]
    if method == "plum":  # PLUM hook: its memory is in the weights (ui/plum_view.py)
        from ui.plum_view import render_plum

        names, renderers = [*TABS, "PLUM"], [*renderers, render_plum]
    _URL.sync("tab", names, TABS[0])
    tabs = st.tabs(names, key=_KEYS["tab"], on_change="rerun")
    _URL.write("tab")
    for tab, renderer in zip(tabs, renderers):
        if tab.open is False:
            continue
        with tab:
            renderer(builder, pos)


def _pick_user_and_method(dataset: Dataset, methods: list[str]) -> tuple[User, str]:
    uids = list(dataset.users)
    c1, c2 = st.columns([2, 3])
    _URL.sync("user", uids, uids[0])
    with c1:
        uid = st.selectbox("User", uids, key=_KEYS["user"],
                           format_func=lambda u: f"{dataset.users[u].name} ({u} · {dataset.users[u].language})")
    _URL.write("user")
    _URL.sync("method", methods, default_method(methods))
    with c2:
        method = st.selectbox("Method", methods, key=_KEYS["method"], format_func=method_label)
    _URL.write("method")
    st.caption(md_escape(get_method_class(method).description))
    return dataset.users[uid], method


# ---------------------------------------------------------------- building


def render_build_panel(builder: MemoryBuilder) -> BuildInfo:
    """Status of the build (stages, LLM calls, tokens, time) and the Build/Resume button."""
    info = builder.store.info(builder.build_id)
    total = builder.total_stages
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Stages done", f"{info.stages_done} / {total}")
    c2.metric("LLM calls", info.llm_calls)
    c3.metric("Tokens", f"{info.tokens_in + info.tokens_out:,}")
    c4.metric("Seconds", f"{info.seconds:.1f}")
    st.caption(f"Build {md_escape(info.build_id)} · embedder {md_escape(info.config.get('embedder', '?'))} · "
               f"{len(info.sessions_done)} of {len(builder.user.sessions)} sessions ingested")
    _offer_fresh_build(builder, info)
    if info.stages_done < total:
        label = "Build" if info.stages_done == 0 else "Resume"
        if st.button(label, key="mem_build", icon=":material/play_arrow:", type="primary"):
            if run_build(builder):
                st.rerun()
    if error := st.session_state.pop("mem_build_error", None):
        st.error(error)
    return info


def _offer_fresh_build(builder: MemoryBuilder, info: BuildInfo) -> None:
    """A stored build made with another embedder can be kept, or a new build started with the configured one."""
    try:
        configured = platform_config().embedder.name
    except ConfigError:
        return
    configured = resolve_name(configured, builder.user.language)
    used = info.config.get("embedder")
    if used in (None, configured):
        return
    st.caption(f"This stored build used embedder {md_escape(used)}; the configured one is {md_escape(configured)}.")
    if st.button(f"New build with {configured}", key="mem_fresh"):
        st.session_state.setdefault("mem_fresh_builds", set()).add((builder.dataset, builder.user.uid, builder.method))
        st.rerun()


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
            st.session_state["mem_build_error"] = f"Build stopped: {md_escape(_error_text(e))}. " \
                                                  "Finished stages are kept; press Resume to continue."
            st.error(st.session_state["mem_build_error"])
            return False
        status.update(label=f"Built {info.stages_done} stages", state="complete")
    return True


def _error_text(e: Exception) -> str:
    from backends.llm.errors import LLMError

    return str(e) if isinstance(e, LLMError) else f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- time slider


def _pick_session(builder: MemoryBuilder, info: BuildInfo) -> int:
    """The session (position) whose memory is shown: a slider over the sessions ingested so far."""
    sessions = builder.user.sessions
    ids = [s.sample_id for s in sessions if s.sample_id in set(info.sessions_done)]
    _URL.sync("session", ids, ids[-1])
    by_id = {s.sample_id: s for s in sessions}
    if len(ids) > 1:
        st.select_slider("Memory as of session", ids, key=_KEYS["session"],
                         format_func=lambda i: f"{i} ({by_id[i].split})")
    else:
        st.caption(f"Memory as of session {md_escape(ids[0])}")
    _URL.write("session")
    sample_id = st.session_state[_KEYS["session"]]
    return next(p for p, s in enumerate(sessions) if s.sample_id == sample_id)


def snapshot_stage(builder: MemoryBuilder, pos: int) -> int:
    """After session ``pos``'s dialogue when that stage is done, else after its logs."""
    done = set(builder.store.done_stages(builder.build_id))
    return dialogue_stage(pos) if dialogue_stage(pos) in done else logs_stage(pos)


# ---------------------------------------------------------------- snapshot: graph, items, detail


def render_snapshot(builder: MemoryBuilder, pos: int) -> None:
    stage = snapshot_stage(builder, pos)
    items = builder.store.items_as_of(builder.build_id, stage)
    if not items:
        st.info(f"{builder.method} keeps no memory items: it builds its prompt from the current session only.")
        return
    graph_col, detail_col = st.columns([3, 2])
    with graph_col:
        render_graph(builder, items, stage)
    with detail_col:
        render_detail(builder, items)
    render_items_table(builder, items, pos)


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
    options = _layer_options(items, bool(expand))
    counts = {layer: sum(1 for i in items if i.layer == layer) for layer in options}
    digest = hashlib.sha1("|".join(options).encode()).hexdigest()[:8]
    shown = st.pills("Layers", options, selection_mode="multi", default=options, key=f"mem_layers_{builder.method}_{digest}",
                     format_func=lambda layer: f"{layer} ({counts[layer]})" if counts[layer] else layer)
    html = graph_html(_fingerprint(builder.build_id, stage, items), items, builder.user, tuple(sorted(expand)),
                      tuple(sorted(shown)))
    st.iframe(html, height=GRAPH_HEIGHT)
    st.caption("Hover a node for its full text; drag to pan, scroll to zoom. Pick an item on the right to inspect it.")


def _fingerprint(build_id: str, stage: int, items: list[MemoryItem]) -> str:
    h = hashlib.sha1(f"{build_id}:{stage}".encode())
    for item in items:
        h.update(item.model_dump_json().encode())
    return h.hexdigest()


@st.cache_data(max_entries=16, show_spinner="Laying out the graph…")
def graph_html(fingerprint: str, _items: list[MemoryItem], _user: User, expand: tuple[str, ...],
               layers: tuple[str, ...]) -> str:
    """The graph page for one snapshot and view settings (``fingerprint`` stands for the items)."""
    return mg.render_pyvis_html(mg.build_memory_graph(_items, _user, set(expand), set(layers)), height=GRAPH_HEIGHT)


def render_detail(builder: MemoryBuilder, items: list[MemoryItem]) -> None:
    """One item: text, layer, origin, provenance resolved to the actual logs and turns, meta, edit, forget."""
    by_id = {i.id: i for i in items}
    ids = list(by_id)
    _URL.sync("item", ids, ids[0])
    item_id = st.selectbox("Item", ids, key=_KEYS["item"], format_func=lambda i: f"{i} · {by_id[i].layer}")
    _URL.write("item")
    item = by_id[item_id]
    if message := st.session_state.pop("mem_detail_message", None):
        st.success(message)
    st.markdown(f":blue-badge[{md_escape(item.layer)}] :gray[created at session {md_escape(item.session_id)} "
                f"· importance {item.importance:g}]")
    with st.container(height=180, border=True):
        st.markdown(md_escape(item.text))
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
        else:
            text = ""
        rows.append({"source": ref, "text": text})
    return pd.DataFrame(rows, columns=["source", "text"])


def _edit_and_forget(builder: MemoryBuilder, item: MemoryItem) -> None:
    with st.expander("Edit"):
        text = st.text_area("Text", value=item.text, key=f"mem_edit_{builder.build_id}_{item.id}", height=140)
        if st.button("Save", key="mem_save", icon=":material/save:", disabled=text == item.text):
            builder.edit(item.id, text)
            st.session_state["mem_detail_message"] = f"Saved the new text of {md_escape(item.id)}."
            st.rerun()
    if st.button("Forget", key="mem_forget", icon=":material/delete:",
                 help="Hides this item and every item derived from it, in every snapshot and every retrieval."):
        gone = builder.forget({item.id})
        st.session_state["mem_detail_message"] = (f"Forgot {md_escape(item.id)} and {len(gone) - 1} derived "
                                                  f"item(s).")
        st.rerun()


def items_frame(items: list[MemoryItem]) -> pd.DataFrame:
    return pd.DataFrame([{"id": i.id, "layer": i.layer, "session": i.session_id, "text": i.text,
                          "importance": i.importance, "sources": len(i.provenance)} for i in items],
                        columns=["id", "layer", "session", "text", "importance", "sources"])


def _select_row(ids: list[str]) -> None:
    """Items table callback: a selected row opens that item in the detail panel."""
    rows = (st.session_state.get("mem_items_table") or {}).get("selection", {}).get("rows", [])
    if rows and rows[0] < len(ids):
        st.session_state[_KEYS["item"]] = ids[rows[0]]


def render_items_table(builder: MemoryBuilder, items: list[MemoryItem], pos: int) -> None:
    st.subheader(f"Items ({len(items)})")
    ids = [i.id for i in items]
    st.dataframe(items_frame(items), hide_index=True, width="stretch", key="mem_items_table",
                 on_select=functools.partial(_select_row, ids), selection_mode="single-row",
                 column_config={"text": st.column_config.TextColumn("text", width="large")})
    sample_id = builder.user.sessions[pos].sample_id
    st.download_button("Export this snapshot (JSONL)", "\n".join(i.model_dump_json() for i in items),
                       file_name=f"{builder.build_id}-{sample_id}.jsonl", mime="application/jsonl",
                       icon=":material/download:", key="mem_export_items")


# ---------------------------------------------------------------- changes


def render_changes(builder: MemoryBuilder, pos: int) -> None:
    """What this session added, changed and removed, against the memory after the previous session."""
    stage = snapshot_stage(builder, pos)
    since = dialogue_stage(pos - 1) if pos > 0 else -1
    diff = builder.store.diff(builder.build_id, stage, since=since)
    previous = builder.user.sessions[pos - 1].sample_id if pos > 0 else "the start"
    st.caption(f"Memory after {md_escape(builder.user.sessions[pos].sample_id)} compared with after {md_escape(previous)}.")
    c1, c2, c3 = st.columns(3)
    c1.metric("Added", len(diff.added))
    c2.metric("Changed", len(diff.changed))
    c3.metric("Removed", len(diff.removed))
    _render_diff(diff)
    notes = builder.store.notes(builder.build_id)
    lines = [n for s in (logs_stage(pos), dialogue_stage(pos)) for n in notes.get(s, [])]
    if lines:
        st.markdown("**Notes from the build**  \n" + "  \n".join(f"- {md_escape(n)}" for n in lines))


def _render_diff(diff: SessionDiff) -> None:
    if diff.added:
        st.markdown("**Added**")
        st.dataframe(items_frame(diff.added), hide_index=True, width="stretch", key="mem_diff_added")
    if diff.changed:
        st.markdown("**Changed**")
        st.dataframe(pd.DataFrame([{"id": a.id, "layer": a.layer, "before": b.text, "after": a.text}
                                   for b, a in diff.changed]), hide_index=True, width="stretch", key="mem_diff_changed")
    if diff.removed:
        st.markdown("**Removed**")
        st.dataframe(items_frame(diff.removed), hide_index=True, width="stretch", key="mem_diff_removed")
    if not (diff.added or diff.changed or diff.removed):
        st.caption("No change in this session.")


# ---------------------------------------------------------------- retrieval


def query_topics(user: User) -> dict[str, tuple[Session, str, str]]:
    """``"{sample_id}/{topic}"`` → (query session, user query, requirement) for every query-session topic."""
    return {f"{s.sample_id}/{t.key}": (s, t.topic.user_query, t.topic.requirement) for s in user.query for t in s.topics}


def render_retrieval(builder: MemoryBuilder, methods: list[str]) -> None:
    """A query (a query-session topic or typed), the trace of this method, and optionally of a second one."""
    query, purpose, current = _pick_query(builder.user)
    others = [m for m in methods if m != builder.method]
    _URL.sync("compare", [NO_COMPARE, *others], NO_COMPARE)
    compare = st.selectbox("Compare with", [NO_COMPARE, *others], key=_KEYS["compare"],
                           format_func=lambda m: m if m == NO_COMPARE else method_label(m))
    _URL.write("compare")
    if not query.strip():
        st.info("Type a query, or pick a topic of a query session.")
        return
    if compare == NO_COMPARE:
        render_trace(builder, query, purpose, current)
        return
    left, right = st.columns(2)
    with left:
        render_trace(builder, query, purpose, current)
    with right:
        try:
            other = open_builder(builder.dataset, builder.user, compare)
        except (ConfigError, ValueError) as e:
            st.error(f"Cannot open {compare}: {md_escape(e)}")
            return
        render_trace(other, query, purpose, current)


def _pick_query(user: User) -> tuple[str, Purpose, Session | None]:
    topics = query_topics(user)
    c1, c2 = st.columns([1, 1])
    sources = (["Query-session topic"] if topics else []) + ["Own query"]
    source = c1.radio("Query", sources, horizontal=True, key="mem_query_source")
    purpose = c2.radio("Purpose", ["requirement", "solution"], horizontal=True, key="mem_purpose",
                       help="requirement: find what the user needs from the vague query; "
                            "solution: propose solutions for the full requirement.")
    if source == "Own query":
        text = st.text_input("Query", key="mem_query_text", placeholder="What would the user like for dinner?")
        st.caption("Own queries read the latest memory built.")
        return text, purpose, None
    key = st.selectbox("Topic", list(topics), key="mem_topic")
    session, user_query, requirement = topics[key]
    query = user_query if purpose == "requirement" else requirement
    st.markdown(f"**{'User query' if purpose == 'requirement' else 'Requirement'}:** {md_escape(query)}")
    st.caption(f"Memory as of the logs of {md_escape(session.sample_id)} (before its dialogue).")
    return query, purpose, session


def _needs_build(builder: MemoryBuilder, current: Session | None) -> int | None:
    """Position up to which the build must run before this retrieval, or None when it is ready."""
    done = set(builder.store.done_stages(builder.build_id))
    if current is None:
        return None if done else len(builder.user.sessions) - 1
    pos = [s.sample_id for s in builder.user.sessions].index(current.sample_id)
    return None if logs_stage(pos) in done else pos


def render_trace(builder: MemoryBuilder, query: str, purpose: Purpose, current: Session | None) -> None:
    st.markdown(f"#### {md_escape(method_label(builder.method))}")
    missing = _needs_build(builder, current)
    if missing is not None and get_method_class(builder.method).uses_llm:
        st.info(f"Build this method through session {md_escape(builder.user.sessions[missing].sample_id)} first "
                "(it calls the LLM).")
        if st.button(f"Build {builder.method}", key=f"mem_build_{builder.method}") and run_build(builder, missing):
            st.rerun()
        return
    try:
        with st.spinner("Retrieving…"):
            trace = builder.retrieve(query, purpose, current)
    except Exception as e:  # noqa: BLE001 - shown as a message, never a traceback
        st.error(f"Retrieval failed: {md_escape(_error_text(e))}")
        return
    show_trace(trace, key=builder.method)


def show_trace(trace: RetrievalTrace, key: str) -> None:
    """Token budget, retrieved items and the exact prompt blocks of one trace, with a JSON export."""
    c1, c2, c3 = st.columns(3)
    c1.metric("Prompt tokens", f"{trace.tokens:,}")
    c2.metric("Full history", f"{trace.full_history_tokens:,}")
    ratio = trace.tokens / trace.full_history_tokens if trace.full_history_tokens else 0.0
    c3.metric("Share of full history", f"{ratio:.1%}")
    st.markdown(f"**Retrieved items** ({len(trace.items)})")
    if trace.items:
        st.dataframe(pd.DataFrame([{"id": r.item.id, "layer": r.item.layer, "score": r.score, "text": r.item.text,
                                    "session": r.item.session_id, "provenance": ", ".join(r.item.provenance)}
                                   for r in trace.items]), hide_index=True, width="stretch", key=f"mem_trace_{key}")
    else:
        st.caption("None: this method retrieves nothing.")
    st.markdown("**Prompt blocks**")
    for block in trace.blocks:
        st.markdown(f"{md_escape(block.title)} :gray[· {len(block.text.splitlines())} line(s)]")
        st.code(block.text or "(empty)", language=None, wrap_lines=True, height=220 if block.text.count("\n") > 10 else "content")
    st.download_button("Export this trace (JSON)", json.dumps(trace.summary(), ensure_ascii=False, indent=1),
                       file_name=f"trace-{key}.json", mime="application/json", icon=":material/download:",
                       key=f"mem_export_trace_{key}")
