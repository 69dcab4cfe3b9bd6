"""The Traces page: every run, build and judgment that called an LLM, searchable and filterable; ``?run=<id>``
opens one as the tree of its calls (:mod:`ui.trace`)."""

from __future__ import annotations

import streamlit as st

from backends.trace import TraceFilter
from studio.workspace import Workspace
from ui.trace import index_frame, render_trace

KINDS = ["simulation", "build", "judgment", "run"]


def _open_selected(ids: list[str]) -> None:
    """Index table callback: a selected row opens that trace."""
    rows = (st.session_state.get("traces_index") or {}).get("selection", {}).get("rows", [])
    if rows and rows[0] < len(ids):
        st.query_params["run"] = ids[rows[0]]


def render_index(ws: Workspace) -> None:
    rows = ws.runs.run_summaries()
    if not rows:
        st.info("No LLM call recorded under a run yet: builds, simulations and judgments appear here as they run.")
        return
    roles = sorted({r for row in rows for r in str(row["roles"] or "").split(",") if r})
    models = sorted({m for row in rows for m in str(row["models"] or "").split(",") if m})
    c1, c2, c3, c4, c5 = st.columns([3, 2, 2, 2, 2])
    text = c1.text_input("Search runs", key="traces_q", placeholder="run id, role, model")
    kinds = c2.multiselect("Kind", KINDS, key="traces_kinds")
    pick_roles = c3.multiselect("Role", roles, key="traces_roles")
    pick_models = c4.multiselect("Model", models, key="traces_models")
    errors = c5.checkbox("With failures", key="traces_err")
    retried = c5.checkbox("With retries", key="traces_retry")
    frame = index_frame(rows, TraceFilter(text=text, roles=pick_roles, models=pick_models, errors_only=errors,
                                          retried_only=retried), kinds)
    ids = list(frame["run"])
    st.caption(f"{len(frame)} of {len(rows)} run(s). Select a row to open its trace.")
    st.dataframe(frame, hide_index=True, width="stretch", key="traces_index", selection_mode="single-row",
                 on_select=lambda: _open_selected(ids))


def render_traces(ws: Workspace) -> None:
    st.title("Traces")
    run_id = st.query_params.get("run")
    if run_id:
        if st.button("All traces", icon=":material/arrow_back:", key="traces_back"):
            st.query_params.pop("run", None)
            st.rerun()
        render_trace(ws, run_id)
        return
    st.caption("Every simulation, memory build and judgment as a tree of its LLM calls: role, model, latency, "
               "prompt / cached / output tokens, cost where priced, retries and why a step was asked again.")
    render_index(ws)
