"""The Memory page's Retrieval tab: what a method retrieves for a topic or a free query (items, the exact
prompt blocks, tokens against the full history), optionally side by side with another method."""

from __future__ import annotations

import json
import logging

import pandas as pd
import streamlit as st

from backends.config import ConfigError
from backends.llm.context import describe_cuts
from backends.llm.errors import LLMError
from backends.store.db import ReadOnlyError
from memory.build import MemoryBuilder
from memory.fit import fit_trace
from memory.methods import get_method_class
from memory.store import logs_stage
from memory.types import Purpose, RetrievalTrace
from palset.dataset import Dataset, Session, User
from sim.fit import first_turn_room
from sim.simulator import LANGUAGE
from ui import platform_state
from ui.memory.common import KEYS, URL, run_build
from ui.methods import NO_COMPARE, method_label, open_builder
from ui.presenting import writes_allowed
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)


def query_topics(user: User) -> dict[str, tuple[Session, str, str]]:
    """``"{sample_id}/{topic}"`` → (query session, user query, requirement) for every query-session topic."""
    return {f"{s.sample_id}/{t.key}": (s, t.topic.user_query, t.topic.requirement) for s in user.query for t in s.topics}


def render_retrieval(dataset: Dataset, builder: MemoryBuilder, methods: list[str]) -> None:
    """A query (a query-session topic or typed), the trace of this method, and optionally of a second one."""
    query, purpose, current = _pick_query(builder.user)
    others = [m for m in methods if m != builder.method]
    URL.sync("compare", [NO_COMPARE, *others], NO_COMPARE)
    compare = st.selectbox("Compare with", [NO_COMPARE, *others], key=KEYS["compare"],
                           format_func=lambda m: m if m == NO_COMPARE else method_label(m))
    URL.write("compare")
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
            other = open_builder(dataset, builder.user.uid, compare)
        except ReadOnlyError:
            log.info("no %s memory of %s in this presentation", compare, builder.user.uid)
            st.info(f"This presentation holds no {md_escape(compare)} memory of this user.")
            return
        except (ConfigError, ValueError) as e:
            log.warning("cannot open %s for comparison: %s", compare, e)
            st.error(f"Cannot open {compare}: {md_escape(error_text(e))}")
            return
        render_trace(other, query, purpose, current)


def _pick_query(user: User) -> tuple[str, Purpose, Session | None]:
    topics = query_topics(user)
    c1, c2 = st.columns([1, 1])
    sources = (["Query-session topic"] if topics else []) + ["Own query"]
    source = c1.radio("Query", sources, horizontal=True, key="mem_query_source")
    URL.sync("purpose", ["requirement", "solution"], "requirement")
    purpose = c2.radio("Purpose", ["requirement", "solution"], horizontal=True, key=KEYS["purpose"],
                       help="requirement: find what the user needs from the vague query; "
                            "solution: propose solutions for the full requirement.")
    URL.write("purpose")
    if source == "Own query":
        text = st.text_input("Query", key="mem_query_text", placeholder="What would the user like for dinner?")
        st.caption("Own queries read the latest memory built.")
        return text, purpose, None
    URL.sync("topic", list(topics), next(iter(topics)))
    key = st.selectbox("Topic", list(topics), key=KEYS["topic"])
    URL.write("topic")
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
    if missing is not None and not writes_allowed():
        st.info(f"This presentation's {md_escape(builder.method)} memory stops before "
                f"{md_escape(builder.user.sessions[missing].sample_id)}: nothing to retrieve from as of that session.")
        return
    if missing is not None and get_method_class(builder.method).uses_llm:
        st.info(f"Build this method through session {md_escape(builder.user.sessions[missing].sample_id)} first "
                "(it calls the LLM).")
        if st.button(f"Build {builder.method}", key=f"mem_build_{builder.method}") and run_build(builder, missing):
            st.rerun()
        return
    try:
        with st.spinner("Retrieving…"):
            trace = builder.retrieve(query, purpose, current)
    except Exception as e:  # shown as a message, never a traceback
        log.exception("retrieval failed (%s, %s)", builder.build_id, purpose)
        st.error(f"Retrieval failed: {md_escape(error_text(e))}")
        return
    if st.toggle("Fit to the assistant's context window", key=f"mem_fit_{builder.method}",
                 help="What the assistant would see on a first turn: its window − max_tokens, by its counter"):
        trace = fit_preview(trace, builder.user.language)
    show_trace(trace, key=builder.method)


def fit_preview(trace: RetrievalTrace, language: str) -> RetrievalTrace:
    """The trace fitted as a simulation's first assistant turn would fit it."""
    try:
        budget = platform_state.llm_client().budget("assistant")
    except (ConfigError, LLMError) as e:
        st.warning(f"The assistant's window could not be read: {md_escape(error_text(e))}")
        return trace
    room = first_turn_room(budget, LANGUAGE.get(language, "English"))
    if room is None:
        st.caption(f"The assistant's window is unknown ({md_escape(budget.window_source)}): set its context window "
                   "in Settings to fit prompts.")
        return trace
    st.caption(f"Assistant: {md_escape(budget.describe())}; {room:,} tokens left for the memory.")
    return fit_trace(trace, room, budget.count, budget.counter_name)


def show_trace(trace: RetrievalTrace, key: str) -> None:
    """Token budget, retrieved items and the exact prompt blocks of one trace, with a JSON export."""
    c1, c2, c3 = st.columns(3)
    c1.metric("Prompt tokens", f"{trace.tokens:,}")
    c2.metric("Full history", f"{trace.full_history_tokens:,}")
    ratio = trace.tokens / trace.full_history_tokens if trace.full_history_tokens else 0.0
    c3.metric("Share of full history", f"{ratio:.1%}")
    st.caption(f"Counted by {md_escape(trace.token_counter or 'estimate')}.")
    if trace.cuts:
        st.caption(f":orange[Fitted to the context window — {md_escape(describe_cuts(trace.cuts))}]")
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
