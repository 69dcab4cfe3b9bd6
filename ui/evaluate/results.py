"""The Evaluate page's FairEval results: outcomes with invalid and dropped topics, judge-bias diagnostics
(position and length), the aggregates and per-user tables, and the exports (each with its metric versions).

All text from data goes through :func:`ui.text.md_escape` or a dataframe cell.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluation.faireval import Judgment
from evaluation.service import DroppedTopic
from evaluation.takeaway_words import Language
from evaluation.takeaways import faireval_takeaway
from memory.methods import ORACLE_LABEL, display_name, is_oracle
from ui.evaluate.data import (
    aggregates_frame,
    dropped_frame,
    judgments_frame,
    outcome_figure,
    outcomes_frame,
    to_csv,
    to_jsonl,
)
from ui.evaluate.takeaway import render_takeaway
from ui.text import md_escape


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _tokens(value: float | None) -> str:
    return "–" if value is None else f"{value:+.0f}"


def render_results(rows: list[dict], judgments: list[Judgment], a: str, b: str, dropped: list[DroppedTopic],
                   language: Language = "en") -> None:
    st.subheader("Outcomes")
    render_takeaway(faireval_takeaway(rows, a, b, language), "eval_outcomes")
    st.caption(f"From {md_escape(display_name(a))}'s side against {md_escape(display_name(b))}: win/tie/lose per topic with "
               "each share's 95% CI; diamond = win rate with ties as half (FastChat's win_rate_adjusted) with its 95% CI by a cluster "
               "bootstrap over users (one judgment — both orders — is one observation). Invalid: no valid judge "
               "sample in one of the two orders; dropped: no finished run of both methods.")
    if is_oracle(a) or is_oracle(b):
        st.caption(f"gold is an {ORACLE_LABEL}: its assistant remembers the dataset's annotations, not what it learnt.")
    st.plotly_chart(outcome_figure(rows, display_name(a), display_name(b)), key="eval_outcomes", width="stretch")
    for r in rows:
        cols = st.columns(5)
        for col, label in zip(cols, ("win", "tie", "lose")):
            col.metric(f"{r['aspect']}: {label}", r[label], help=_share_help(r, label))
        cols[3].metric("Invalid topics", r["invalid"], help="no valid judge sample in one order: not decided. "
                       + _share_help(r, "invalid"))
        cols[4].metric("Dropped topics", r["dropped"], help="a simulation of one method did not finish: not judged. "
                       + _share_help(r, "dropped"))
        render_position(r)
    render_dropped(dropped)
    render_bias(rows)
    st.dataframe(outcomes_frame(rows, language), hide_index=True, width="stretch", key="eval_outcomes_table")
    with st.expander("Every aggregate figure (as exported)"):
        st.dataframe(aggregates_frame(rows), hide_index=True, width="stretch", key="eval_aggregates")
    per_user = [{"aspect": r["aspect"], "user": u, **{x: c[x] for x in ("win", "tie", "lose", "invalid")},
                 "adjusted_win_rate": c["adjusted_win_rate"]} for r in rows for u, c in r["per_user"].items()]
    if per_user:
        with st.expander("Per user"):
            st.dataframe(pd.DataFrame(per_user), hide_index=True, width="stretch", key="eval_per_user")
    models = sorted({f"{j.judge_model} · k={j.k} · {j.prompt_name} v{j.prompt_version} · T="
                     f"{'?' if j.judge_temperature is None else f'{j.judge_temperature:g}'} · seed "
                     f"{'none' if j.seed is None else j.seed}" for j in judgments})
    st.caption("Judge: " + md_escape("; ".join(models)) + " · metric versions " + md_escape(
        rows[0]["metric_versions"] if rows else ""))


def _share_help(r: dict, outcome: str) -> str:
    share = r.get(f"{outcome}_share_all")
    return "" if share is None else f"{share:.0%} of all {r['topics']} topic(s), invalid and dropped included"


def _ci(r: dict, key: str) -> str:
    lo, hi = r.get(key) or (None, None)
    return "" if lo is None or lo != lo else f" (95% CI {lo:.0%}–{hi:.0%}, cluster bootstrap over users)"


def render_position(r: dict) -> None:
    """The headline figures a reviewer asks before trusting a win rate: the adjusted win rate beside win/tie/lose,
    how often the two orders agree, how many wins/losses the judge's slot preference decided, how thin they are."""
    c1, c2, c3, c4, c5 = st.columns(5)
    lo, hi = r["adjusted_win_rate_ci"]
    c1.metric("Win rate (ties ½)", _rate(r.get("win_rate_adjusted", r["adjusted_win_rate"])),
              help=f"(win + ½ tie) / decided topics (FastChat's win_rate_adjusted); 95% CI {lo:.2f}–{hi:.2f} by a "
                   f"cluster bootstrap over {r.get('users', '?')} user(s)")
    if r.get("ci_note"):
        st.caption(f"{md_escape(r['aspect'])}: {md_escape(r['ci_note'])}.")
    c2.metric("Position consistency", _rate(r.get("position_consistency")),
              help="judgments whose two orders name the same winner (of those with a winner in both orders)"
                   + _ci(r, "position_consistency_ci"))
    c3.metric("Position-decided", f"{r.get('position_decided', 0)} / {r.get('decided', 0)}",
              help="wins/losses whose two orders named opposite winners: each order preferred the same slot, and the "
                   "verdict is whichever slot preference was larger" + _ci(r, "position_decided_ci"))
    margin = r.get("median_margin_decided")
    c4.metric("Score margin (median)", "–" if margin is None else f"{margin:.2f}",
              help="|mean A − mean B| on the judge's 1–10 scale over wins/losses; "
                   f"{_rate(r.get('thin_share'))} of them by at most 0.5")
    c5.metric("Orders with identical samples", f"{r.get('identical_orders', 0)} / {r.get('orders_with_samples', 0)}",
              help="orders whose k valid samples all gave the same scores — at temperature 0 the k samples are one")


def render_dropped(dropped: list[DroppedTopic]) -> None:
    if not dropped:
        return
    with st.expander(f"Dropped topics ({len(dropped)}): simulated by one method, not finished by both"):
        st.dataframe(dropped_frame(dropped), hide_index=True, width="stretch", key="eval_dropped")


def render_bias(rows: list[dict]) -> None:
    st.subheader("Judge bias")
    for r in rows:
        lb = r["length_bias"]
        c1, c2, c3, c4 = st.columns(4)
        c1.metric(f"{r['aspect']}: topics", r["n"], help="valid decisions (win + tie + lose)")
        c2.metric("Flip rate", f"{r['flip_rate']:.0%}",
                  help="topics where the winner changed when the two dialogues were swapped")
        c3.metric("Slot-1 win rate", f"{r['slot1_win_rate']:.0%}",
                  help="share of valid samples where whichever dialogue was shown first scored higher (0.5 = no bias)")
        c4.metric("Invalid samples", f"{r['invalid_samples']} / {r['samples']}",
                  help=f"{r.get('cut_samples', 0)} of them cut at the judge's answer budget (max_tokens): raise it, "
                       "or leave it unset for the role's own budget fitted to the window")
        d1, d2, d3, d4 = st.columns(4)
        d1.metric("Longer dialogue wins", _rate(lb["longer_win_rate"]),
                  help=f"over {lb['longer_decided']} decided topic(s) whose dialogues differ in length (assistant "
                       "tokens); 0.5 = no length bias")
        for col, verdict in zip((d2, d3, d4), ("win", "tie", "lose")):
            col.metric(f"Length A − B when {verdict}", _tokens(lb["length_diff"][verdict]),
                       help="mean difference in assistant tokens between A's and B's dialogue on topics with this verdict")


def render_exports(judgments: list[Judgment], rows: list[dict], a: str, b: str, dropped: list[DroppedTopic]) -> None:
    stem = f"faireval_{a}_vs_{b}"
    c1, c2, c3 = st.columns(3)
    c1.download_button("Judgments CSV", lambda: to_csv(judgments_frame(judgments)), file_name=f"{stem}_judgments.csv",
                       mime="text/csv", icon=":material/download:", key="eval_csv", on_click="ignore")
    c2.download_button("Aggregates CSV", lambda: to_csv(aggregates_frame(rows)), file_name=f"{stem}_aggregates.csv",
                       mime="text/csv", icon=":material/download:", key="eval_agg_csv", on_click="ignore")
    c3.download_button("Judgments + aggregates JSONL", lambda: to_jsonl(judgments, rows, dropped), file_name=f"{stem}.jsonl",
                       mime="application/jsonl", icon=":material/download:", key="eval_jsonl", on_click="ignore")
