"""The PLUM tab of the Memory page: QA pairs per session, the training loss curve with its
hyper-parameters, and a probe — the same question to the adapted and the base model, side by side.

PLUM's memory is in the weights, so it can only be inspected by what it was trained on and by asking.
Training itself runs through the page's Build button (each session's dialogue stage trains the adapter).
"""

from __future__ import annotations

import logging

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from memory.build import MemoryBuilder
from memory.plum.adapter import AdapterStore, Checkpoint
from memory.plum.qa import LAYER
from memory.store import dialogue_stage
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)


def qa_frame(builder: MemoryBuilder, pos: int) -> pd.DataFrame:
    """The QA pairs written for the session at ``pos`` (as stored, forgotten ones left out)."""
    sid = builder.user.sessions[pos].sample_id
    items = [i for i in builder.store.items_as_of(builder.build_id, dialogue_stage(pos))
             if i.layer == LAYER and i.session_id == sid]
    cols = ["polarity", "form", "topic", "question", "answer", "source"]
    return pd.DataFrame([{c: i.meta.get(c, "") for c in cols} for i in items], columns=cols)


def loss_figure(adapters: AdapterStore) -> go.Figure:
    """Weighted loss per step, one trace per session (steps numbered across sessions)."""
    fig = go.Figure()
    rows = pd.DataFrame(adapters.loss_curve(), columns=["step", "loss", "session"])
    for sid, part in rows.groupby("session", sort=False):
        fig.add_trace(go.Scatter(x=part["step"], y=part["loss"], mode="lines+markers", name=str(sid)))
    fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10}, xaxis_title="step",
                      yaxis_title="weighted loss", title="Training loss")
    return fig


def sessions_frame(checkpoints: list[Checkpoint]) -> pd.DataFrame:
    return pd.DataFrame([{"session": c.record.sample_id, "pairs": c.record.pairs, "steps": c.record.steps,
                          "loss before": c.record.loss_before, "loss after": c.record.losses[-1] if c.record.losses else None,
                          "seconds": c.record.seconds, "device": c.record.device, "version": c.record.version}
                         for c in checkpoints])


def render_plum(builder: MemoryBuilder, pos: int) -> None:
    method = builder.impl
    adapters: AdapterStore = method.adapters  # type: ignore[attr-defined]  # this tab is shown only for the plum method
    session = builder.user.sessions[pos]
    st.markdown(f"**QA pairs of {md_escape(session.sample_id)}**")
    st.caption("Forgetting a pair (Snapshot tab) hides it, but what the adapter learnt from it stays in its weights "
               "until the adapter is retrained without it (a new build).")
    frame = qa_frame(builder, pos)
    if frame.empty:
        st.caption("No QA pairs for this session (not built yet, or nothing to ask about).")
    else:
        st.dataframe(frame, hide_index=True, width="stretch", key="plum_qa")
    checkpoints = adapters.checkpoints()
    if not checkpoints:
        st.info("No adapter trained yet: press **Build** above; each session's dialogue stage trains it.")
        return
    st.plotly_chart(loss_figure(adapters), key="plum_loss")
    st.dataframe(sessions_frame(checkpoints), hide_index=True, width="stretch", key="plum_sessions")
    last = checkpoints[-1].record
    with st.expander("Hyper-parameters and adapter"):
        st.json({"hyper": last.hyper, "base_model": last.base_model, "trainable_params": last.trainable_params,
                 "adapter_bytes": last.adapter_bytes, "folder": str(adapters.root)})
    render_probe(builder, session, checkpoints)


def render_probe(builder: MemoryBuilder, session, checkpoints: list[Checkpoint]) -> None:
    """Ask the adapter as of the shown session and the base model the same question."""
    ckpt = next((c for c in reversed(checkpoints) if c.record.session_index <= session.index), None)
    st.markdown("**Probe**" + (f" :gray[· adapter through {md_escape(ckpt.record.sample_id)}]" if ckpt else ""))
    from ui.presenting import read_only_note, writes_allowed

    if not writes_allowed():
        read_only_note("the model is not asked here (no LLM calls while presenting)")
        return
    question = st.text_input("Question", key="plum_probe_q", placeholder="Did we talk about my brother's exams?")
    if not st.button("Ask both", key="plum_probe", icon=":material/compare_arrows:", disabled=not question.strip()):
        return
    from memory.plum.provider import probe

    try:
        with st.spinner("Loading the model and answering…"):
            answers = probe(builder.impl, question.strip(), ckpt)  # type: ignore[arg-type]  # this tab is shown only for the plum method
    except Exception as e:  # shown as a message, never a traceback
        log.exception("PLUM probe failed (%s)", builder.build_id)
        st.error(f"Probe failed: {md_escape(error_text(e))}")
        return
    left, right = st.columns(2)
    left.markdown("**Adapted**")
    left.code(answers.get("adapted", "(no adapter)"), language=None, wrap_lines=True)
    right.markdown("**Base model**")
    right.code(answers["base"], language=None, wrap_lines=True)
