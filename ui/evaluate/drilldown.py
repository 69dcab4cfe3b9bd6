"""The Evaluate page's drill-down: judged topics, one topic's ground truth, both dialogues, every judge sample.

The chosen topic lives in the URL (``?topic=<sample_id>_<topic_key>``), so a deep link opens it.
All text from data goes through :func:`ui.text.md_escape`.
"""

from __future__ import annotations

import logging

import streamlit as st

from evaluation.faireval import ASPECTS, Judgment, ground_truth
from evaluation.service import topic_context
from memory.methods import display_name
from palset.dataset import Dataset
from sim.store import SimStore
from sim.types import RunRecord
from ui.evaluate.data import topic_id, topics_frame
from ui.text import error_text, md_escape
from ui.trace import render_trace_link

log = logging.getLogger(__name__)

DECISION_BADGES = {"win": "green", "tie": "gray", "lose": "red", "invalid": "orange"}


def _select_topic(ids: list[str]) -> None:
    rows = (st.session_state.get("eval_topics_table") or {}).get("selection", {}).get("rows", [])
    if rows and rows[0] < len(ids):
        st.query_params["topic"] = ids[rows[0]]


def render_drilldown(dataset: Dataset, sims: SimStore, judgments: list[Judgment], a: str, b: str) -> None:
    st.subheader("Judged topics")
    frame = topics_frame(judgments)
    ids = [f"{s}_{t}" for s, t in zip(frame["sample"], frame["topic"])]
    st.caption("Select a row to read both dialogues and every judge sample.")
    st.dataframe(frame, hide_index=True, width="stretch", key="eval_topics_table", selection_mode="single-row",
                 on_select=lambda: _select_topic(ids))
    wanted = st.query_params.get("topic")
    if not wanted:
        return
    chosen = [j for j in judgments if topic_id(j) == wanted]
    if not chosen:
        st.warning(f"No judgment of {md_escape(a)} vs {md_escape(b)} on {md_escape(wanted)} in this view.")
        return
    render_topic(dataset, sims, chosen)


def render_topic(dataset: Dataset, sims: SimStore, chosen: list[Judgment]) -> None:
    first = chosen[0]
    st.subheader(f"{md_escape(first.user_id)} · {md_escape(first.sample_id)} · {md_escape(first.topic_key)}",
                 anchor="eval-topic")
    if st.button("Close", key="eval_close_topic", icon=":material/close:", type="tertiary"):
        st.query_params.pop("topic", None)
        st.rerun()
    render_ground_truth(dataset, first)
    render_dialogues(sims, first)
    for j in chosen:
        render_samples(j)


def render_ground_truth(dataset: Dataset, j: Judgment) -> None:
    with st.expander("Ground truth (what the judge was given)", expanded=True):
        try:
            ctx = topic_context(dataset, j.user_id, j.sample_id, j.topic_key)
        except KeyError as e:  # the active dataset may lack this topic
            log.info("judgment %s: topic not in the active dataset: %s", j.judgment_key, e)
            st.caption(f"The active dataset does not have this topic: {md_escape(error_text(e))}")
            return
        c1, c2 = st.columns(2)
        for col, aspect in zip((c1, c2), ASPECTS):
            with col:
                st.markdown(f"**{aspect.capitalize()}**  \n{md_escape(ground_truth(ctx, aspect))}")


def _load(sims: SimStore, run_id: str) -> RunRecord | None:
    try:
        return sims.load(run_id)
    except KeyError:
        return None


def render_dialogues(sims: SimStore, j: Judgment) -> None:
    c1, c2 = st.columns(2, gap="medium")
    for col, method, run_id, label in ((c1, j.method_a, j.run_a, "A"), (c2, j.method_b, j.run_b, "B")):
        with col:
            st.markdown(f"#### {label}: {md_escape(display_name(method))}  \n:gray[{md_escape(run_id)}]")
            record = _load(sims, run_id)
            if record is None:
                st.caption("This run is no longer stored; the judged text follows.")
                st.markdown(md_escape(j.texts["order1"].assistant_1 if label == "A" else j.texts["order1"].assistant_2))
                continue
            for utt in record.utterances:
                with st.chat_message("user" if utt.side == "user" else "assistant"):
                    st.markdown(f":gray-badge[{md_escape(utt.act.value)}]  \n{md_escape(utt.content)}")


def render_samples(j: Judgment) -> None:
    colour = DECISION_BADGES.get(j.decision, "gray")
    means = (f"{j.mean_a:.2f} vs {j.mean_b:.2f}" if j.mean_a is not None and j.mean_b is not None
             else "no valid sample in both orders")
    st.markdown(f"##### {md_escape(j.aspect.capitalize())}: :{colour}-badge[{md_escape(j.decision)}] :gray[mean {means} · "
                f"order 1 → {md_escape(j.order1_winner)} · order 2 → {md_escape(j.order2_winner)}"
                f"{' · flipped' if j.flipped else ''} · {j.invalid} invalid]")
    if j.invalid_reason:
        st.warning(f"Not judged: {md_escape(j.invalid_reason)}")
    render_trace_link(j.judgment_key, "Trace of the judge's calls")
    names = {1: (j.method_a, j.method_b), 2: (j.method_b, j.method_a)}
    c1, c2 = st.columns(2, gap="medium")
    for col, order in ((c1, 1), (c2, 2)):
        first, second = names[order]
        with col:
            title = "as is" if order == 1 else "swapped"
            st.markdown(f"**Order {order} ({title}): assistant-1 = {md_escape(first)}, "
                        f"assistant-2 = {md_escape(second)}**")
            for s in [s for s in j.samples if s.order == order]:
                with st.container(border=True):
                    if not s.ok:
                        st.markdown(f":orange-badge[invalid] :gray[sample {s.index + 1} · {s.attempts} tries]  \n"
                                    + md_escape("; ".join(s.errors) or "no valid output"))
                        continue
                    st.markdown(f":gray[sample {s.index + 1}] · assistant-1 **{md_escape(s.slot1)}** · assistant-2 "
                                f"**{md_escape(s.slot2)}** → {md_escape(j.method_a)} {md_escape(s.score_a)}, "
                                f"{md_escape(j.method_b)} {md_escape(s.score_b)}")
                    analysis = s.analysis or {}
                    for part in ("assistant-1", "assistant-2", "overall"):
                        if analysis.get(part):
                            st.markdown(f"*{part}:* {md_escape(analysis[part])}")
                    render_reasoning(s.reasoning)


def render_reasoning(thoughts: list[str]) -> None:
    """A reasoning judge's thinking, apart from its scores (never parsed)."""
    if any(thoughts):
        with st.expander("Judge's reasoning (kept apart from the scores)"):
            for thought in filter(None, thoughts):
                st.code(thought, language=None, wrap_lines=True)
