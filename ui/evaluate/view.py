"""Rendering of the Evaluate page: FairEval pairwise judging of simulated runs, and the single-turn leaderboard.

A method pair (methods with finished runs in the active dataset) and an aspect are picked; Judge runs
FairEval (k samples per order, both orders) on the paired finished runs not judged yet, storing each
judgment the moment it completes. Results: stacked win/tie/lose bars with the bootstrap 95% CI of the
adjusted win rate, invalid and dropped topics next to them, the judge-bias diagnostics (position and
length), human-in-the-loop calibration (send the most uncertain topics to review; outcomes as judged
and as calibrated), a per-topic drill-down (both dialogues, every judge sample in both orders, the
ground truth) and exports. Below: the single-turn leaderboard from stored bench results, judge–human
agreement against pairwise review answers (for the chosen pair and aspects) and PersonaMem-v2 accuracy
(a placeholder until results exist). ``FIDELITY.md`` (what each number reproduces) opens at the top.

State lives in the URL (``?pair=<A>__<B>&aspect=…&judge=<model>&topic=<sample_id>_<topic_key>``): a deep link
opens exactly one judged topic. Judgments are shown per judge model: every judge with records of the pair is
offered (the configured judge first), so judgments made elsewhere (an imported bundle) are never hidden.
``?section=leaderboards`` opens the page on the leaderboards and draws the rest of the page (pairwise judging,
agreement, PersonaMem-v2, experiments: some 10 tables and 3 charts) only when its toggle is turned on. While
presenting no control that judges or measures is offered. All text from data goes through :func:`ui.text.md_escape`
or a dataframe cell.
"""

from __future__ import annotations

import logging

import streamlit as st

from backends.config import ConfigError
from backends.paths import PROJECT_ROOT
from evaluation.faireval import ASPECTS, Judgment, apply_decision
from evaluation.faireval_stats import one_per_topic
from evaluation.service import dropped_topics, pair_runs
from evaluation.takeaways import faireval_takeaway
from memory.methods import display_name
from palset.dataset import Dataset, dataset_key
from sim.store import SimStore
from ui import platform_state
from ui.evaluate.boards import render_agreement, render_leaderboard, render_personamem
from ui.evaluate.calibration import render_calibration
from ui.evaluate.data import finished_methods, judgments_fingerprint, latest_judgments, pair_aggregates
from ui.evaluate.drilldown import render_drilldown
from ui.evaluate.experiments import render_experiments
from ui.evaluate.fidelity import render_fidelity_board
from ui.evaluate.judging import judge_options, judge_temperature, render_judge_button
from ui.evaluate.results import render_exports, render_results
from ui.evaluate.simfidelity import (
    filter_by_interventions,
    filter_by_simulator,
    render_arm_interventions,
    render_simulator_board,
    with_arm_interventions,
)
from ui.evaluate.takeaway import board_language, dataset_arg, with_commands
from ui.platform_state import base_workspace
from ui.presenting import read_only_note, writes_allowed
from ui.records_model import render_records_model
from ui.text import md_escape

log = logging.getLogger(__name__)

FIDELITY = PROJECT_ROOT / "FIDELITY.md"

ASPECT_CHOICES = ["requirement", "preference", "both"]
PAIR_SEP = "__"
_KEYS = {"a": "eval_a", "b": "eval_b", "aspect": "eval_aspect", "judge": "eval_judge_model"}


# ---------------------------------------------------------------- URL-synced state


def _sync_from_url(name: str, wanted: str | None, allowed: list[str], fallback: str) -> None:
    """Before drawing a widget: a URL value that changed since the last run wins over the widget's value."""
    key, seen = _KEYS[name], f"_url_eval_{name}"
    if wanted in allowed and wanted != st.session_state.get(seen):
        st.session_state[key] = wanted
        st.session_state[seen] = wanted
    elif st.session_state.get(key) not in allowed:
        st.session_state[key] = fallback


def _pair_from_url() -> tuple[str | None, str | None]:
    raw = st.query_params.get("pair") or ""
    if PAIR_SEP in raw:
        a, b = raw.split(PAIR_SEP, 1)
        return a, b
    return None, None


# ---------------------------------------------------------------- page


def render_fidelity() -> None:
    """FIDELITY.md — what every metric and method reproduces, from which source, and each departure. The document
    (some 80 kB) is sent to the browser only when asked: a folded expander still carries its whole content, which
    every view of the page would otherwise render."""
    with st.expander("How these numbers are computed: FIDELITY.md (sources, sanity checks, departures)"):
        if not FIDELITY.is_file():
            st.markdown("FIDELITY.md is missing.")
            return
        text = FIDELITY.read_text(encoding="utf-8")
        heads = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("## ")]
        st.caption("Sections: " + md_escape(" · ".join(heads)))
        if st.toggle("Show the whole document", key="eval_fidelity_doc"):
            st.markdown(text)


def render_judge_model_notice() -> None:
    """Which model made the stored judgments, when it is not this session's judge (offered for this session)."""
    try:
        cfg = platform_state.platform_config()
    except ConfigError as e:  # the sidebar shows the error; the records still open
        log.info("no judge-model notice: the configuration is broken: %s", e)
        return
    render_records_model(base_workspace().runs.models_used(), cfg, ("judge",), "eval", may_change=writes_allowed())


def render_evaluate(dataset: Dataset) -> None:
    st.title("Evaluate")
    render_fidelity()
    dkey = dataset_key(dataset.root)
    sims = base_workspace().sims
    methods = finished_methods(sims, dkey)
    boards_first = st.query_params.get("section") == "leaderboards"  # a link to the leaderboards opens on them
    if boards_first:
        render_boards(dataset, dkey)
        if not st.toggle(REST_OF_PAGE, key="eval_rest_of_page"):  # drawn when asked: the link is for the boards
            return
    st.header("Multi-turn: FairEval pairwise judging")
    render_judge_model_notice()
    selection = None
    if len(methods) < 2:
        st.info("Judging needs finished simulation runs of at least two methods on the same topics in this dataset. "
                "Run them on the Simulate page (or with `pal simulate`).")
    else:
        selection = render_pairwise(dataset, dkey, sims, methods)
    if not boards_first:
        render_boards(dataset, dkey)
    st.header("Judge–human agreement")
    render_agreement(dkey, selection)
    st.header("PersonaMem-v2 accuracy by type")
    render_personamem(dkey)
    st.header("Experiments")
    render_experiments()


REST_OF_PAGE = "Show FairEval pairwise judging, judge–human agreement, PersonaMem-v2 and experiments"


def render_boards(dataset: Dataset, dkey: str) -> None:
    st.header("Single-turn leaderboard")
    render_leaderboard(dataset, dkey)
    st.header("Memory fidelity against the gold memory")
    render_fidelity_board(dataset, dkey)
    st.header("Simulator fidelity")
    render_simulator_board(dataset, dkey)


def configured_judge() -> str | None:
    """The judge model this session would judge with (None when the configuration is broken)."""
    try:
        return platform_state.platform_config().role("judge").model
    except ConfigError:
        return None


def judges_with_records(judgments: list[Judgment], configured: str | None) -> list[str]:
    """Judge models that have judgments here, the configured one first, then by how many they made."""
    counts: dict[str, int] = {}
    for j in judgments:
        counts[j.judge_model] = counts.get(j.judge_model, 0) + 1
    return sorted(counts, key=lambda m: (m != configured, -counts[m], m))


def _pick_judge(judgments: list[Judgment]) -> str | None:
    """Which judge's judgments are shown (the judges with records; URL ``?judge=``)."""
    judges = judges_with_records(judgments, configured_judge())
    if not judges:
        return None
    _sync_from_url("judge", st.query_params.get("judge"), judges, judges[0])
    judge = st.selectbox("Judge", judges, key=_KEYS["judge"], help="Judgments are shown by the judge model that made "
                         "them; the configured judge comes first when it has judged this pair.")
    st.query_params["judge"] = judge
    st.session_state["_url_eval_judge"] = judge
    return judge


def _pick(methods: list[str]) -> tuple[str, str, list[str]]:
    url_a, url_b = _pair_from_url()
    _sync_from_url("a", url_a, methods, methods[0])
    c1, c2, c3 = st.columns([2, 2, 2])
    with c1:
        a = st.selectbox("Method under test (A)", methods, key=_KEYS["a"], format_func=display_name)
    others = [m for m in methods if m != a]
    _sync_from_url("b", url_b, others, others[0])
    with c2:
        b = st.selectbox("Baseline (B)", others, key=_KEYS["b"], format_func=display_name)
    _sync_from_url("aspect", st.query_params.get("aspect"), ASPECT_CHOICES, "both")
    with c3:
        aspect = st.segmented_control("Aspect", ASPECT_CHOICES, required=True, key=_KEYS["aspect"])
    pair = f"{a}{PAIR_SEP}{b}"
    if st.query_params.get("pair") != pair:
        st.query_params["pair"] = pair
        st.query_params.pop("topic", None)
    st.query_params["aspect"] = aspect
    st.session_state["_url_eval_a"], st.session_state["_url_eval_b"] = a, b
    st.session_state["_url_eval_aspect"] = aspect
    return a, b, list(ASPECTS) if aspect == "both" else [aspect]


def render_pairwise(dataset: Dataset, dkey: str, sims: SimStore,
                    methods: list[str]) -> tuple[str, str, list[str], float]:
    """The pairwise section; returns the chosen (A, B, aspects, tie threshold) for the agreement section."""
    a, b, aspects = _pick(methods)
    pairs = pair_runs(sims, dkey, a, b)
    c1, c2, c3, c4 = st.columns([1, 1, 1, 2])
    k = int(c1.number_input("Samples per order (k)", 1, 10, 3, key="eval_k",
                            help="FairEval Multiple Evidence: k judge samples with A shown first, k with B first, "
                                 "drawn at temperature 1 by default (at 0 they would be one sample)."))
    threshold = float(c2.number_input("Tie threshold", 0.0, 9.0, 0.0, step=0.25, key="eval_threshold",
                                      help="A tie when the mean scores differ by at most this (0: exact equality, "
                                           "as the paper). Decisions of stored judgments are recomputed with it."))
    temperature = judge_temperature(c3, k)
    with c4:
        if writes_allowed():
            with st.expander("Judge prompt and seed"):
                seed, prompts = judge_options(st.container())
            render_judge_button(dataset, sims, pairs, aspects, k, threshold, temperature, seed=seed, prompts=prompts)
        else:
            read_only_note("judging is not offered; these are the bundle's judgments")
    store = base_workspace().evals
    stored = [j for j in one_per_topic(store.judgments(dataset=dkey, method_a=a, method_b=b)
                                       + store.judgments(dataset=dkey, method_a=b, method_b=a), a, b)
              if j.aspect in aspects]  # a topic judged as (B, A) too is one observation, seen from A's side
    judge = _pick_judge(stored)
    judgments = latest_judgments(j for j in stored if j.judge_model == judge)
    judgments = filter_by_simulator([apply_decision(j, threshold) for j in judgments], dkey)
    judgments = filter_by_interventions(with_arm_interventions(judgments, sims))
    dropped = dropped_topics(sims, dkey, a, b)
    if not judgments:
        empty = faireval_takeaway([], a, b, board_language(dataset), dataset=dataset_arg(dataset)).empty or ""
        st.info(with_commands(empty) + (f" {len(dropped)} topic(s) are dropped: no finished run of both methods."
                                        if dropped else ""))
        return a, b, aspects, threshold
    st.caption(f"Judged by **{md_escape(judge)}** · {len(judgments)} judgment(s) shown.")
    rows = pair_aggregates(judgments_fingerprint(judgments, dropped), threshold, judgments, dropped)
    render_results(rows, judgments, a, b, dropped, board_language(dataset))
    render_arm_interventions(judgments, a, b)
    render_calibration(dkey, judgments, a, b, aspects)
    render_drilldown(dataset, sims, judgments, a, b)
    render_exports(judgments, rows, a, b, dropped)
    return a, b, aspects, threshold
