"""The Evaluate page's human-in-the-loop calibration (FairEval's third part): the judged topics ranked by the
entropy of their 2k verdicts, "send the N most uncertain topics to review" (a blinded pairwise batch), and
win/tie/lose as judged and as calibrated by people, with how many items people decided and how often they
overturned the judge. All text from data goes through :func:`ui.text.md_escape` or a dataframe cell.
"""

from __future__ import annotations

import logging
import secrets

import pandas as pd
import streamlit as st

from evaluation.calibration import (
    FAIREVAL_TEMPERATURE,
    Calibration,
    TopicUncertainty,
    calibrate,
    plan_calibration,
    rank_topics,
    sampling_note,
    top_share,
)
from evaluation.faireval import Judgment
from evaluation.human_agreement import calibration_votes
from review.accounts import LOCAL_ADMIN
from review.store import ReviewStore
from ui.access import actor_name
from ui.platform_state import base_workspace, home_workspace
from ui.presenting import read_only_note, writes_allowed
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)


def calibration_frame(cals: list[Calibration]) -> pd.DataFrame:
    """One row per aspect: win/tie/lose/invalid as judged and as calibrated, people's decisions and overturns."""
    rows = []
    for c in cals:
        rows.append({"aspect": c.aspect, **{f"judged {o}": c.judged[o] for o in ("win", "tie", "lose", "invalid")},
                     **{f"calibrated {o}": c.calibrated[o] for o in ("win", "tie", "lose", "invalid")},
                     "decided by people": c.decided_by_people, "overturned": c.overturned,
                     "overturn rate": c.overturn_rate, "split votes": c.splits,
                     "adjusted win rate (judged)": c.judged["adjusted_win_rate"],
                     "adjusted win rate (calibrated)": c.calibrated["adjusted_win_rate"]})
    return pd.DataFrame(rows)


def _bpde(t: TopicUncertainty, aspect: str) -> str:
    if aspect not in t.entropy:
        return ""
    e = t.entropy[aspect]
    return "invalid" if e is None else f"{e:.3f}"


def uncertainty_frame(ranked: list[TopicUncertainty]) -> pd.DataFrame:
    """The judged topics, most uncertain first, with each aspect's BPDE (text cells: "invalid" when undecided)."""
    aspects = sorted({a for t in ranked for a in t.entropy})
    return pd.DataFrame([{"user": t.user_id, "sample": t.sample_id, "topic": t.topic_key,
                          **{f"BPDE {a}": _bpde(t, a) for a in aspects}} for t in ranked])


def render_calibration(dkey: str, judgments: list[Judgment], a: str, b: str, aspects: list[str]) -> None:
    st.subheader("Human-in-the-loop calibration")
    st.caption("FairEval's third calibration: each topic's uncertainty is the entropy (bits) of its 2k judge verdicts "
               "across both orders (balanced position diversity entropy; 0 = all agree, 1.58 = maximal); people decide "
               "the most uncertain topics, and their majority replaces the judge there. Topics of equal entropy are "
               "ordered by a seeded random draw.")
    if note := sampling_note(judgments):
        st.warning(md_escape(note) + f" (set **Sampling temperature** to {FAIREVAL_TEMPERATURE:g} above and press "
                   "Judge; the new judgments replace these here).")
    store = base_workspace().reviews
    votes = calibration_votes(store, dkey, (a, b))
    if votes:
        cals = [calibrate(judgments, votes, aspect) for aspect in aspects]
        st.dataframe(calibration_frame(cals), hide_index=True, width="stretch", key="eval_calibrated")
        for c in cals:
            if c.rows:
                with st.expander(f"{c.aspect.capitalize()}: {c.decided_by_people} item(s) decided by people, "
                                 f"{c.overturned} overturned the judge"):
                    st.dataframe(pd.DataFrame(c.rows), hide_index=True, width="stretch", key=f"eval_cal_{c.aspect}")
    else:
        st.caption("No answered calibration batch for this pair yet.")
    if writes_allowed():
        render_send(store, dkey, rank_topics(judgments), bool(votes))
    else:
        read_only_note("no review batch is made here")


def render_send(store: ReviewStore, dkey: str, ranked: list[TopicUncertainty], has_votes: bool) -> None:
    with st.expander("Send the most uncertain topics to review", expanded=not has_votes):
        st.dataframe(uncertainty_frame(ranked), hide_index=True, width="stretch", key="eval_uncertainty", height=220)
        people = [acc.name for acc in home_workspace().accounts.list()] or [LOCAL_ADMIN]
        c1, c2, c3 = st.columns([1, 3, 1])
        n = int(c1.number_input("Topics (N)", 1, max(len(ranked), 1), max(top_share(len(ranked)), 1),
                                key="eval_cal_n", help="default: the top 20 % (FairEval's example)"))
        annotators = c2.multiselect("Annotators", people, key="eval_cal_annotators")
        overlap = int(c3.number_input("Annotators per item", 1, 20, min(2, max(len(annotators), 1)),
                                      key="eval_cal_overlap"))
        if st.button(f"Send the {n} most uncertain topics to review", key="eval_cal_send", icon=":material/group:",
                     disabled=not annotators or not ranked):
            try:
                seed = secrets.randbelow(2**31)  # annotators cannot work the A/B order out from a topic's title
                plan = plan_calibration("", dkey, ranked, n, seed=seed, overlap=overlap, annotators=annotators)
                batch_id = store.create_batch(plan, actor_name())
            except ValueError as e:
                log.warning("calibration batch not created for %s vs %s", ranked[0].method_a, ranked[0].method_b,
                            exc_info=True)
                st.error(md_escape(error_text(e)))
                return
            home_workspace().audit.record(actor_name(), "review.batch_create", batch_id, title=plan.title,
                                          task=plan.task, items=len(plan.items), annotators=annotators,
                                          calibration=True)
            st.success(f"Created review batch {md_escape(batch_id)} with {len(plan.items)} blinded pairwise item(s).")
            st.page_link("pages/review.py", label="Open the Review page", icon=":material/arrow_forward:",
                         query_params={"batch": batch_id})
