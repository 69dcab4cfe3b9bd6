"""The Evaluate page's lower sections: single-turn leaderboard, judge–human agreement, PersonaMem-v2 accuracy."""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from evaluation.aggregate import leaderboard
from evaluation.faireval import apply_decision
from evaluation.human_agreement import AgreementReport, compare_by_aspect, pairwise_votes
from evaluation.personamem.evaluate import accuracy_by_method
from evaluation.service import query_topics
from evaluation.tasks import TASKS
from evaluation.versions import METRIC_VERSIONS
from memory.methods import ORACLE_LABEL, is_oracle
from palset.dataset import Dataset
from protocol.units import task_units
from ui.agreement import render_judge_human
from ui.evaluate.data import leaderboard_frame, stored_results, to_csv, with_versions
from ui.jobs import failure_text, follow, submit
from ui.methods import available_methods, method_label
from ui.platform_state import base_workspace
from ui.presenting import read_only_note, writes_allowed
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)

LEADER_CAPTION = ("BLEU ×100 (restatement R-, proposal P-): Chinese segmented with jieba as the paper; English with "
                  "lower-cased word tokens — the paper's code runs jieba on every language, so English BLEU is not "
                  "comparable with it. G-score 0–100: failed judge calls are left out of the mean (column 'G judge "
                  "failed'); failed predictions score 0 ('invalid'). S-score −100–100; 95% bootstrap CIs over topics.")


def render_leaderboard(dataset: Dataset, dkey: str) -> None:
    results = stored_results(dkey)
    if results:
        frame = leaderboard_frame(leaderboard(results))
        st.dataframe(frame, hide_index=True, width="stretch", key="eval_leaderboard")
        st.caption(LEADER_CAPTION)
        if any(is_oracle(r.method) for r in results):
            st.caption(f"gold is an {ORACLE_LABEL}: the assistant answers from the dataset's annotations (gold memory), "
                       "the ceiling for the other methods.")
        st.download_button("Leaderboard CSV", to_csv(with_versions(frame, "bleu", "g_score", "s_score")),
                           file_name="single_turn_leaderboard.csv", mime="text/csv", icon=":material/download:",
                           key="eval_leader_csv", on_click="ignore")
    else:
        st.info("No single-turn results for this dataset yet.")
    if not writes_allowed():
        read_only_note("single-turn tasks are not run here")
        return
    with st.expander("Run single-turn tasks"):
        methods = st.multiselect("Methods", available_methods(), key="eval_bench_methods", format_func=method_label)
        users = st.multiselect("Users (empty: all)", list(dataset.users), key="eval_bench_users")
        if st.button("Run single-turn tasks", key="eval_bench_run", icon=":material/play_arrow:",
                     disabled=not methods):
            try:
                units = task_units(dataset, query_topics(dataset, users or None), methods, list(TASKS))
                job_id = submit("bench-tasks", f"single-turn tasks {', '.join(methods)}", units)
            except Exception as e:  # a message, never a traceback
                log.exception("single-turn tasks cannot start (%s)", ", ".join(methods))
                st.error(f"The tasks cannot start: {md_escape(error_text(e))}.")
                return
            summary = follow(job_id, "Running the single-turn tasks")
            if summary.status != "done":
                st.error(f"The tasks stopped: {md_escape(failure_text(summary))}. Finished results are stored; run "
                         "again to continue.")
                return
            st.rerun()


def agreement_reports(dkey: str, a: str, b: str, aspects: list[str], threshold: float) -> dict[str, AgreementReport]:
    """Per aspect: the judge (either orientation, decisions recomputed with the threshold) against the human
    majority of every pairwise review batch of this dataset on the pair ``a``/``b``; win is ``a``'s side."""
    votes = [v for v in pairwise_votes(base_workspace().reviews, dataset=dkey)
             if set(v.methods) == {a, b} and v.aspect in aspects]
    judgments = [apply_decision(j, threshold) for j in base_workspace().evals.judgments(dataset=dkey)
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


def personamem_results(dkey: str) -> list[dict]:
    """Stored PersonaMem-v2 accuracy rows per method (every stored record: PersonaMem-v2 has its own users)."""
    return accuracy_by_method(base_workspace().personamem.records())


def render_personamem(dkey: str) -> None:
    rows = personamem_results(dkey)
    if not rows:
        st.info("No PersonaMem-v2 results yet. `pal personamem` prints its accuracy report (and writes every record "
                "with `--records`); results appear here once they are stored in the PAL home.")
        return
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="eval_personamem")
    st.caption("Accuracy by preference type, ownership (who), static/updated and conversation scenario; open-ended "
               "rows judged by several judges or on the 0–1 scale add the mean score. Metric version "
               f"personamem={METRIC_VERSIONS['personamem']}.")
