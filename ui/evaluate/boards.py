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
from evaluation.takeaway_words import estimate_of, figure_label, method_label
from evaluation.takeaways import single_turn_takeaway
from evaluation.tasks import TASKS
from evaluation.versions import METRIC_VERSIONS
from memory.methods import ORACLE_LABEL, is_oracle
from palset.dataset import Dataset
from protocol.units import task_units
from ui.agreement import render_judge_human
from ui.charts import build_estimates_figure
from ui.evaluate.data import leaderboard_frame, stored_results, to_csv, with_versions
from ui.evaluate.takeaway import board_language, dataset_arg, render_takeaway
from ui.jobs import failure_text, follow, submit
from ui.methods import available_methods
from ui.methods import method_label as picker_label
from ui.platform_state import base_workspace
from ui.presenting import read_only_note, writes_allowed
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)

LEADER_CAPTION = ("Each figure with its 95% bootstrap CI over topics in brackets; two methods whose intervals overlap "
                  "cannot be told apart. BLEU ×100 (restatement R-, proposal P-): Chinese segmented with jieba as the "
                  "paper; English with lower-cased word tokens — the paper's code runs jieba on every language, so "
                  "English BLEU is not comparable with it. G-score 0–100: failed judge calls are left out of the mean "
                  "(column 'G judge failed'); failed predictions score 0 ('invalid'). S-score −100–100.")


def render_leaderboard(dataset: Dataset, dkey: str) -> None:
    results = stored_results(dkey)
    rows = leaderboard(results)
    takeaway = single_turn_takeaway(rows, board_language(dataset), dataset=dataset_arg(dataset), is_oracle=is_oracle)
    if render_takeaway(takeaway, "eval_leaderboard"):
        series = {method_label(r["method"]): {k: _triple(r[k]) for k in ("g_score", "s_score")} for r in rows}
        st.plotly_chart(build_estimates_figure(series, {k: figure_label(k) for k in ("g_score", "s_score")},
                                               percent=False), key="eval_leaderboard_chart", width="stretch")
        frame = leaderboard_frame(rows)
        st.dataframe(frame, hide_index=True, width="stretch", key="eval_leaderboard")
        st.caption(LEADER_CAPTION)
        if any(is_oracle(r.method) for r in results):
            st.caption(f"gold is an {ORACLE_LABEL}: the assistant answers from the dataset's annotations (gold memory), "
                       "the ceiling for the other methods.")
        st.download_button("Leaderboard CSV", lambda: to_csv(with_versions(frame, "bleu", "g_score", "s_score")),
                           file_name="single_turn_leaderboard.csv", mime="text/csv", icon=":material/download:",
                           key="eval_leader_csv", on_click="ignore")
    if not writes_allowed():
        read_only_note("single-turn tasks are not run here")
        return
    with st.expander("Run single-turn tasks"):
        methods = st.multiselect("Methods", available_methods(), key="eval_bench_methods", format_func=picker_label)
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


def _triple(cell: dict) -> tuple[float | None, float | None, float | None]:
    """A board cell as (value, low, high) for the chart (None where not measured)."""
    e = estimate_of(cell)
    b = e.bounds() or (None, None)
    return e.value, b[0], b[1]


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
