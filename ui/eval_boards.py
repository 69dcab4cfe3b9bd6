"""The Evaluate page's lower sections: single-turn leaderboard, judge–human agreement, PersonaMem-v2 accuracy."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from evaluation.aggregate import leaderboard
from evaluation.faireval import apply_decision
from evaluation.human_agreement import AgreementReport, compare_by_aspect, pairwise_votes
from evaluation.personamem import accuracy_by_method, stored_records
from evaluation.service import bench_tasks
from evaluation.store import EvalStore
from memory.methods import ORACLE_LABEL, is_oracle
from palset.dataset import Dataset
from review.store import ReviewStore
from ui import platform_state
from ui.eval_data import error_text, leaderboard_frame, stored_results, to_csv
from ui.memory_common import available_methods, method_label
from ui.text import md_escape


def render_leaderboard(dataset: Dataset, dkey: str) -> None:
    results = stored_results(dkey)
    if results:
        frame = leaderboard_frame(leaderboard(results))
        st.dataframe(frame, hide_index=True, width="stretch", key="eval_leaderboard")
        st.caption("BLEU ×100 (restatement R-, proposal P-), G-score 0–100, S-score −100–100; "
                   "95% bootstrap CIs over topics.")
        if any(is_oracle(r.method) for r in results):
            st.caption(f"gold is an {ORACLE_LABEL}: the assistant answers from the dataset's annotations (gold memory), "
                       "the ceiling for the other methods.")
        st.download_button("Leaderboard CSV", to_csv(frame), file_name="single_turn_leaderboard.csv", mime="text/csv",
                           icon=":material/download:", key="eval_leader_csv", on_click="ignore")
    else:
        st.info("No single-turn results for this dataset yet.")
    with st.expander("Run single-turn tasks"):
        methods = st.multiselect("Methods", available_methods(), key="eval_bench_methods", format_func=method_label)
        users = st.multiselect("Users (empty: all)", list(dataset.users), key="eval_bench_users")
        if st.button("Run single-turn tasks", key="eval_bench_run", icon=":material/play_arrow:",
                     disabled=not methods):
            bar = st.progress(0.0, text="Running the single-turn tasks…")
            try:
                bench_tasks(platform_state.llm_client(), dataset, methods, EvalStore(), users or None,
                            progress=lambda d, t, w: bar.progress(d / t, text=f"[{d}/{t}] {w}"))
            except Exception as e:  # noqa: BLE001 - a message, never a traceback; finished results are stored
                st.error(f"The tasks stopped: {md_escape(error_text(e))}. Finished results are stored; run again "
                         "to continue.")
                return
            st.rerun()


def agreement_reports(dkey: str, a: str, b: str, aspects: list[str], threshold: float) -> dict[str, AgreementReport]:
    """Per aspect: the judge (either orientation, decisions recomputed with the threshold) against the human
    majority of every pairwise review batch of this dataset on the pair ``a``/``b``; win is ``a``'s side."""
    votes = [v for v in pairwise_votes(ReviewStore(), dataset=dkey)
             if set(v.methods) == {a, b} and v.aspect in aspects]
    judgments = [apply_decision(j, threshold) for j in EvalStore().judgments(dataset=dkey)
                 if {j.method_a, j.method_b} == {a, b} and j.aspect in aspects]
    return compare_by_aspect(votes, judgments, (a, b))


def render_agreement(dkey: str, selection: tuple[str, str, list[str], float] | None) -> None:
    reports = agreement_reports(dkey, *selection) if selection else {}
    if not any(r.matched for r in reports.values()):
        items = sum(r.items for r in reports.values())
        st.info("Judge–human agreement appears here once pairwise human annotations (Review page) of the chosen "
                "method pair match stored judgments" + (f": {items} answered item(s), none judged yet." if items
                                                       else "."))
        return
    render_judge_human(reports, "eval_human")


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
    c3.metric("Cohen's κ (no ties)", _fmt(r.kappa, ".3f"),
              help=f"win/lose items only; over win/tie/lose: {_fmt(r.kappa_all, '.3f')}")
    c4.metric("Unmatched items", r.unmatched, help="human items without a valid judgment")
    st.caption(f"{r.human_ties} human tie(s), {r.judge_ties} judge tie(s), {r.splits} split vote(s) "
               "(no majority: left out of the table).")
    left, right = st.columns([2, 3])
    left.dataframe(r.confusion, key=f"{key}_confusion")
    right.dataframe(pd.DataFrame(r.rows), hide_index=True, width="stretch", key=f"{key}_items")


def personamem_results(dkey: str) -> list[dict]:
    """Stored PersonaMem-v2 accuracy rows per method (every stored record: PersonaMem-v2 has its own users)."""
    return accuracy_by_method(stored_records())


def render_personamem(dkey: str) -> None:
    rows = personamem_results(dkey)
    if not rows:
        st.info("No PersonaMem-v2 results yet. `pal personamem` prints its accuracy report (and writes every record "
                "with `--records`); results appear here once they are stored in the PAL home.")
        return
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="eval_personamem")
