"""The Evaluate page's experiments: every experiment job (``pal experiment run``), its progress, and the paper's
tables from exactly the records its units produced (the same as ``pal experiment report``); the jobs of every
kind with Cancel and Retry."""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from jobs.types import format_seconds
from protocol.calibration import Calibration
from protocol.config import ExperimentConfig
from protocol.plan import make_plan, time_lines
from protocol.report import build_report, fair_rows, render, simulator_table, single_rows
from ui.jobs import WORKERS, progress_text, render_jobs
from ui.platform_state import base_workspace
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)


def render_plan_times(exp: ExperimentConfig, job_config: dict) -> None:
    """The experiment's planned time and its endpoint-bound, app-bound and scheduled parts, on request (a plan of a
    large experiment takes seconds to make)."""
    with st.expander("Time estimate (endpoint-bound and app-bound)"):
        if not st.button("Estimate from this home's measurements", key="eval_exp_plan"):
            st.caption("The plan counts the experiment's calls and times them at the endpoint's measured speed and "
                       "the app's own CPU per call, as `pal experiment plan FILE` does.")
            return
        try:
            view = base_workspace().configured(job_config)
            plan = make_plan(exp, view.dataset(exp.dataset), view.config,
                             Calibration.load(view.runs, view.memory, view.jobs.store))
        except (KeyError, ValueError, OSError) as e:  # a dataset moved away, a method no longer known: a message
            log.exception("experiment %s: no plan", exp.name)
            st.error(f"No estimate: {md_escape(error_text(e))}")
            return
        st.markdown("\n".join(f"- {md_escape(line)}" for line in time_lines(plan)))


def render_experiments() -> None:
    engine = base_workspace().jobs
    experiments = engine.store.jobs(kind="experiment", limit=100)
    if not experiments:
        st.info("No experiments yet. Describe one in a TOML file (see `experiments/demo-small.toml`), then "
                "`pal experiment plan FILE` and `pal experiment run FILE`.")
    else:
        names = {j.job_id: j for j in experiments}
        choice = st.selectbox("Experiment", list(names), key="eval_experiment",
                              format_func=lambda j: f"{names[j].title} · {names[j].status}")
        summary = names[choice]
        st.progress(min(summary.progress, 1.0), text=progress_text("Units", summary))
        eta = summary.eta(WORKERS)
        st.caption(f"Started by {md_escape(summary.created_by)}" + (f" · ETA {format_seconds(eta)}" if eta else ""))
        try:
            exp = ExperimentConfig.model_validate(engine.store.config(choice)["experiment"])
            render_plan_times(exp, engine.store.config(choice))
            report = build_report(exp, engine.store.units(choice), base_workspace().evals,
                                  base_workspace().simfidelity)
        except Exception as e:  # an experiment stored by another version, a missing record: a message
            log.exception("experiment %s: no report", choice)
            st.error(f"No report for {md_escape(choice)}: {md_escape(error_text(e))}")
        else:
            tables = [("Single-turn tasks", single_rows(report)), (f"FairEval against {exp.baseline}", fair_rows(report))]
            if report.simulators:
                tables.append(("Simulator fidelity", simulator_table(report)))
            for title, (head, rows) in tables:
                st.subheader(title)
                st.dataframe(pd.DataFrame(rows, columns=head), hide_index=True, width="stretch",
                             key=f"eval_exp_{title[:6]}")
            st.caption("BLEU ×100, G-score 0–100, S-score −100–100, adjusted win rate = win + ½ tie; 95% bootstrap "
                       "CIs over topics; invalid and dropped items next to each figure.")
            c1, c2, c3 = st.columns(3)
            for col, fmt, mime in ((c1, "markdown", "text/markdown"), (c2, "csv", "text/csv"),
                                   (c3, "latex", "application/x-tex")):
                col.download_button(f"Report ({fmt})", render(report, fmt), file_name=f"{exp.name}.{fmt[:3]}",
                                    mime=mime, key=f"eval_exp_{fmt}", on_click="ignore", icon=":material/download:")
    with st.expander("All jobs (memory builds, simulations, judging, generation, experiments)"):
        render_jobs()
