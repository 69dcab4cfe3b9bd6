"""Rendering of the Memory page: build a user's memory with a method, scrub it session by session,
inspect, edit or forget items, and see what retrieval puts in front of the assistant.

State lives in the URL (``?user=…&method=…&session=…&tab=…&item=…&compare=…``), so any view can be
pasted as a link. All text from data goes through :func:`ui.text.md_escape`, a dataframe cell,
``st.code`` or ``st.json``; the graph escapes it itself (see :mod:`ui.memory.graph`).
"""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from backends.config import ConfigError
from backends.embeddings import resolve_name
from backends.store.db import ReadOnlyError
from memory.build import MemoryBuilder
from memory.methods import ORACLE_LABEL, get_method_class, is_oracle
from memory.store import BuildInfo, SessionDiff, dialogue_stage, logs_stage
from palset.dataset import Dataset, User, dataset_key
from ui.datasets import is_bundled_demo
from ui.memory.builds import cached_line, pick_build, render_made_by
from ui.memory.common import KEYS, URL, run_build, snapshot_stage
from ui.memory.fidelity import render_fidelity
from ui.memory.retrieval import render_retrieval
from ui.memory.snapshot import items_frame, render_snapshot
from ui.methods import FRESH, available_methods, default_method, method_label, open_builder, unavailable_methods
from ui.platform_state import platform_config
from ui.presenting import read_only_note, writes_allowed
from ui.text import error_text, md_escape
from ui.trace import render_trace_link

log = logging.getLogger(__name__)

ORACLE = "gold"  # the method the Memory page opens with on the bundled demo users
TABS = ["Snapshot", "Changes", "Retrieval", "Fidelity"]


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
    build_id = pick_build(dataset_key(dataset.root), user.uid, method)
    try:
        builder = open_builder(dataset, user.uid, method, build_id=build_id)
    except ReadOnlyError as e:  # presenting: only the bundle's builds exist
        log.info("no %s memory of %s to present: %s", method, user.uid, e)
        st.info(f"This presentation holds no {md_escape(method)} memory of {md_escape(user.uid)}. Make one with "
                f"`pal memory build --user {md_escape(user.uid)} --method {md_escape(method)}` and export it again.")
        return
    except (ConfigError, ValueError, KeyError) as e:
        log.warning("cannot open the memory of %s with %s: %s", user.uid, method, e)
        st.error(f"Cannot open the memory of {md_escape(user.uid)} with {method}: {md_escape(error_text(e))}")
        return
    if get_method_class(method).oracle and not builder.store.done_stages(builder.build_id) and writes_allowed():
        run_build(builder)  # the gold memory needs no LLM: built on first use, in seconds
    info = render_build_panel(builder)
    if info.stages_done == 0:
        st.info("Nothing built yet" + (": press **Build** to ingest this user's sessions." if writes_allowed() else "."))
        return
    pos = _pick_session(builder, info)
    names, renderers = TABS, [render_snapshot, render_changes, lambda b, _p: render_retrieval(dataset, b, methods),
                              lambda b, p: render_fidelity(dataset, b, p, methods)]
    if method == "plum":  # PLUM hook: its memory is in the weights (ui/memory/plum.py)
        from ui.memory.plum import render_plum

        names, renderers = [*TABS, "PLUM"], [*renderers, render_plum]
    URL.sync("tab", names, TABS[0])
    tabs = st.tabs(names, key=KEYS["tab"], on_change="rerun")
    URL.write("tab")
    for tab, renderer in zip(tabs, renderers):
        if tab.open is False:
            continue
        with tab:
            renderer(builder, pos)


def _pick_user_and_method(dataset: Dataset, methods: list[str]) -> tuple[User, str]:
    uids = list(dataset.users)
    c1, c2 = st.columns([2, 3])
    URL.sync("user", uids, uids[0])
    with c1:
        uid = st.selectbox("User", uids, key=KEYS["user"],
                           format_func=lambda u: f"{dataset.users[u].name} ({u} · {dataset.users[u].language})")
    URL.write("user")
    opening = ORACLE if is_bundled_demo(dataset.root) and ORACLE in methods else default_method(methods)
    URL.sync("method", methods, opening)
    with c2:
        method = st.selectbox("Method", methods, key=KEYS["method"], format_func=method_label)
    URL.write("method")
    st.caption(md_escape(get_method_class(method).description))
    if unavailable := unavailable_methods():
        st.caption("Not available in this install: " + "; ".join(
            f"{md_escape(name)} ({md_escape(reason)})" for name, reason in unavailable.items()))
    if is_oracle(method):
        st.info(f"**{ORACLE_LABEL.capitalize()}**: built from the dataset's own annotations (gold situations and their "
                "logs, profile, requirements, pos/neg preferences), not learnt from the sessions. It is the ceiling the "
                "other methods are measured against (Fidelity tab); query topics never enter it.",
                icon=":material/verified:")
    return dataset.users[uid], method


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
    if builder.llm is not None and (line := cached_line(builder.llm.store.totals(run_id=builder.build_id))):
        st.caption(line)
    if builder.llm is not None:
        render_build_reasoning(builder.llm.store.reasoning(run_id=builder.build_id, limit=50))
    render_made_by(info.build_id, builder.method)
    if info.llm_calls:
        render_trace_link(info.build_id, "Trace of the build's LLM calls")
    if not writes_allowed():
        read_only_note("building is not offered")
        return info
    _offer_fresh_build(builder, info)
    from ui.jobs import active_job, watch

    running = active_job(f"memory-{builder.build_id}-", kind="memory")
    if running is not None:  # started earlier (this page closed, another session): it goes on; watch it
        watch(running.job_id, f"Building {builder.method} memory", concurrency=1)  # its sessions build in turn
    elif info.stages_done < total:
        label = "Build" if info.stages_done == 0 else "Resume"
        if st.button(label, key="mem_build", icon=":material/play_arrow:", type="primary"):
            if run_build(builder):
                st.rerun()
    if error := st.session_state.pop("mem_build_error", None):
        st.error(error)
    return info


def render_build_reasoning(rows: list[dict]) -> None:
    """The thinking a reasoning model emitted during this build: kept apart from the outputs that were parsed."""
    if not rows:
        return
    with st.expander(f"Reasoning the model kept apart during this build ({len(rows)} call(s), newest first)"):
        for r in rows:
            st.caption(f"{md_escape(r['prompt_name'] or r['role'])} · {r['reasoning_tokens']} tokens "
                       f"({md_escape(r['reasoning_counter'] or '?')})")
            st.code(r["text"], language=None, wrap_lines=True)


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
        st.session_state.setdefault(FRESH, set()).add((builder.dataset, builder.user.uid, builder.method))
        st.rerun()


def _pick_session(builder: MemoryBuilder, info: BuildInfo) -> int:
    """The session (position) whose memory is shown: a slider over the sessions ingested so far."""
    sessions = builder.user.sessions
    ids = [s.sample_id for s in sessions if s.sample_id in set(info.sessions_done)]
    URL.sync("session", ids, ids[-1])
    by_id = {s.sample_id: s for s in sessions}
    if len(ids) > 1:
        st.select_slider("Memory as of session", ids, key=KEYS["session"],
                         format_func=lambda i: f"{i} ({by_id[i].split})")
    else:
        st.caption(f"Memory as of session {md_escape(ids[0])}")
    URL.write("session")
    sample_id = st.session_state[KEYS["session"]]
    return next(p for p, s in enumerate(sessions) if s.sample_id == sample_id)


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
