"""Simulator fidelity on the Simulate page: a badge per check on every simulated user turn, the evidence in an
expander, the run's figures under its header and the button that checks the run.

The checks are read from the run store (``sim_fidelity``); "Check the simulated user" computes them with the
validated rule classifier and the workspace's embedders (:mod:`evaluation.simfidelity.service`) and stores them.
All text from data goes through :func:`ui.text.md_escape` or ``st.json``.
"""

from __future__ import annotations

import logging

import streamlit as st

from evaluation.simfidelity import CHECK_DEFINITIONS, CHECK_LABELS
from evaluation.simfidelity.registry import CHECK_SPECS
from evaluation.simfidelity.service import matchers, measure_run
from evaluation.simfidelity.types import RunFidelity, TurnChecks
from palset.dataset import Dataset
from sim.types import RunRecord
from ui.platform_state import base_workspace, workspace
from ui.presenting import writes_allowed
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)
COLOURS = {"pass": "green", "fail": "red", "n/a": "gray"}
MARKS = {"pass": "✓", "fail": "✗", "n/a": "–"}
LABELS = CHECK_LABELS
# each registered check's pass rate under its label, then the two figures that are no check's rate
FIGURES = [*((s.figure, s.label) for s in CHECK_SPECS), ("over_cooperation", "over-cooperation"),
           ("vagueness_gap", "vagueness gap")]


def stored_checks(run_id: str) -> RunFidelity | None:
    """The run's newest stored simulator-fidelity result (None: not checked yet)."""
    return base_workspace().simfidelity.of_run(run_id)


def badges(turn: TurnChecks) -> str:
    """One coloured badge per check of the turn (✓ pass, ✗ fail, – n/a)."""
    return " ".join(f":{COLOURS[c.outcome]}-badge[{MARKS[c.outcome]} {LABELS[c.check]}]" for c in turn.checks)


def render_turn_checks(turn: TurnChecks, key: str) -> None:
    """The turn's badges, and each check's reason and evidence in an expander."""
    st.markdown(badges(turn))
    with st.expander("Why (simulator checks and their evidence)"):
        for c in turn.checks:
            st.markdown(f":{COLOURS[c.outcome]}-badge[{MARKS[c.outcome]} {LABELS[c.check]}] {md_escape(c.reason)}",
                        help=CHECK_DEFINITIONS[c.check])
            if c.evidence:
                st.json(c.evidence, expanded=False)


def _value(figure: str, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:+.3f}" if figure in ("over_cooperation", "vagueness_gap") else f"{value:.0%}"


def render_run_checks(record: RunRecord, dataset: Dataset, result: RunFidelity | None) -> None:
    """The run's figures (or "n/a — no gold" and why), and the button that checks (or re-checks) the run."""
    if result is not None and result.no_gold:
        st.caption(f"Simulated user: {md_escape(result.no_gold)}")
    elif result is not None:
        stale = " (checked before the last utterances: check again)" if result.utterances != len(record.utterances) else ""
        verdict = {True: ":green-badge[passed every check]", False: ":red-badge[failed a check]",
                   None: ":gray-badge[nothing checkable]"}[result.passed]
        parts = " · ".join(f"{label} {_value(name, result.figures.get(name))}" for name, label in FIGURES)
        st.markdown(f"Simulated user {verdict} :gray[{md_escape(parts)}{md_escape(stale)}]",
                    help="Rates over this run's checked user turns; n/a checks are left out. "
                         + " ".join(f"{k}: {v}" for k, v in CHECK_DEFINITIONS.items()))
        if result.unavailable:
            st.caption("Not checked here: " + md_escape("; ".join(f"{k} ({v})" for k, v in result.unavailable.items())))
    if not writes_allowed() or not any(u.side == "user" for u in record.utterances):
        return
    label = "Check the simulated user" if result is None else "Check again"
    if st.button(label, key=f"sim_check_{record.run_id}", icon=":material/fact_check:", type="tertiary",
                 help="Every simulated user turn against the dataset's gold: vague opening, truthful confirmations, "
                      "verdicts consistent with the preferences, in persona, as scheduled (rule classifier; "
                      "judge variants on Evaluate and in `pal simulate fidelity`)."):
        check_now(record, dataset)


def check_now(record: RunRecord, dataset: Dataset) -> None:
    ws = workspace()
    try:
        with st.spinner("Checking the simulated user…"):
            measure_run(record, dataset, matchers(lambda language: ws.embedder(None, language)), ws.simfidelity,
                        recompute=True)
    except Exception as e:  # an embedder or store problem: a message, never a traceback
        log.exception("simulator checks of %s failed", record.run_id)
        st.error(f"The run could not be checked: {md_escape(error_text(e))}")
        return
    st.rerun()
