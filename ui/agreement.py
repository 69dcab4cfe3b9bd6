"""Judge–human agreement as a section (Evaluate's agreement board and the Review page's batch overview)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluation.human_agreement import AgreementReport
from ui.text import md_escape


def render_judge_human(reports: dict[str, AgreementReport], key: str) -> None:
    """The agreement section: one block per aspect (metrics, the confusion table, the items)."""
    for aspect, report in reports.items():
        render_agreement_report(aspect, report, f"{key}_{aspect}")


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def render_agreement_report(aspect: str, r: AgreementReport, key: str) -> None:
    a, b = r.pair
    st.markdown(f"**{md_escape(aspect.capitalize())}**: win/tie/lose from {md_escape(a)}'s side against "
                f"{md_escape(b)}, judge vs the human majority")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Matched items", r.matched, help=f"human items with a judgment; {r.unmatched} without one, "
                                                 f"{r.unmatched_judgments} judgment(s) without human answers")
    c2.metric("Agreement (no ties)", _fmt(r.agreement_rate, ".0%"),
              help=f"{r.agreements} of {r.compared} items that neither side called a tie")
    c3.metric("Cohen's κ, judge vs human majority (no ties)", _fmt(r.kappa, ".3f"),
              help=f"win/lose items only; over win/tie/lose: {_fmt(r.kappa_all, '.3f')}")
    c4.metric("Unmatched items", r.unmatched, help="human items without a valid judgment")
    d1, d2, _, _ = st.columns(4)
    d1.metric("Fleiss' κ, judge + annotators (non-tie)", _fmt(r.fleiss, ".3f"),
              help=f"Mem-PAL Table 12's form: {r.fleiss_items} item(s) none of whose {r.fleiss_raters} raters said tie "
                   "(the paper reports 0.54 requirement, 0.62 preference)")
    d2.metric("Fleiss' κ, annotators only (non-tie)", _fmt(r.fleiss_humans, ".3f"),
              help=f"{r.fleiss_humans_items} item(s) answered by two or more people, none saying tie")
    st.caption(f"{r.human_ties} human tie(s), {r.judge_ties} judge tie(s), {r.splits} split vote(s) "
               "(no majority: left out of the table).")
    left, right = st.columns([2, 3])
    left.dataframe(r.confusion, key=f"{key}_confusion")
    right.dataframe(pd.DataFrame(r.rows), hide_index=True, width="stretch", key=f"{key}_items")
