"""The Memory page's Fidelity tab: how close this method's memory is to the gold memory, per layer and per
session (plots over sessions, the method's layers beside gold's, the reference memories' figures beside its
own, the gold items it missed).

On the gold memory itself (which scores 1.0 by construction) the tab measures a method picked here,
building it first when it needs no LLM. Every figure carries its definition and threshold; one that cannot be
measured reads "n/a" with the reason. All text from data goes through :func:`ui.text.md_escape` or a
dataframe cell.
"""

from __future__ import annotations

import logging
from functools import partial

import streamlit as st

from evaluation.fidelity import DEFINITIONS
from evaluation.fidelity.compute import StatementVectors
from evaluation.fidelity.service import fidelity_key, judge_report, load_snapshots, measure_build, reference_reports
from evaluation.fidelity.store import FidelityStore
from evaluation.fidelity.types import FidelityConfig, FidelityReport
from memory.build import MemoryBuilder
from memory.methods import ORACLE_LABEL, get_method_class, is_oracle
from memory.methods.gold import gold_stages
from memory.store import dialogue_stage
from palset.dataset import Dataset
from ui import fidelity as fc
from ui.memory.common import run_build, snapshot_stage
from ui.methods import method_label, open_user_builder
from ui.platform_state import base_workspace
from ui.presenting import read_only_note, writes_allowed
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)
BASELINE = fc.FIDELITY_BASELINE
METRICS = (("situation_within", "Situation κ"), ("requirement_f1", "Requirement F1"),
           ("preference_f1", "Preference F1"), ("polarity_errors", "Polarity errors"),
           ("background_f1", "Background F1"), ("text_precision", "Text precision"), ("text_noise", "Noise"))
COMPARE = ("situation_within", "requirement_recall", "requirement_f1", "preference_f1", "background_f1",
           "text_precision", "text_f1", "text_noise")


def fidelity_store() -> FidelityStore:
    """The run store's fidelity table (the workspace's)."""
    return base_workspace().fidelity


def render_fidelity(dataset: Dataset, builder: MemoryBuilder, pos: int, methods: list[str]) -> None:
    if is_oracle(builder.method):
        measured = _measured_method(builder, methods)
        if measured is None:
            return
        builder = measured
    st.caption(f"How close **{md_escape(method_label(builder.method))}** is to the gold memory: the H²Memory a "
               f"perfect builder would make from the dataset's own annotations ({ORACLE_LABEL}), holding nothing of a "
               "query session's situation. Each figure compares the memory after a session's dialogue with gold at the "
               "same point; the headline is the last history session; definitions under **Definitions**.")
    default = FidelityConfig().threshold_for(builder.embedder.name)
    tau = st.number_input("Match threshold τ (cosine)", -1.0, 1.0, value=default, step=0.005, format="%.3f",
                          key=f"mem_fid_tau_{builder.embedder.name}",
                          help=f"Two statements match when the cosine of their {builder.embedder.name} embeddings "
                               f"reaches τ. Default: {FidelityConfig().threshold_source(builder.embedder.name)}.")
    config = FidelityConfig(threshold=None if tau == default else float(tau))
    vectors = StatementVectors(builder.embedder)
    try:
        if writes_allowed():
            with st.spinner("Measuring against the gold memory and the reference memories…"):
                report = measure_build(builder, fidelity_store(), config=config, vectors=vectors)
        elif (found := stored_report(builder, config)) is not None:
            report = found
        else:
            st.info(f"This presentation holds no fidelity report of {md_escape(builder.method)} for this user at "
                    f"τ = {tau:g} (make one with `pal memory fidelity --method {md_escape(builder.method)}`).")
            return
    except Exception as e:
        log.exception("fidelity of %s for user %s failed", builder.method, builder.user.uid)
        st.error(f"Could not measure fidelity: {md_escape(error_text(e))}")
        return
    if not report.sessions:
        st.info("No session's dialogue is ingested yet: build further to measure this memory.")
        return
    if report.stale:
        st.warning(f"This report is stale — {md_escape(report.stale)}.")
    at = min(pos, len(report.sessions) - 1)
    _render_figures(builder, report, at)
    refs = _render_references(dataset, builder, report, config, vectors)
    _render_misses(report)
    _render_details(builder, report, refs)


def _render_references(dataset: Dataset, builder: MemoryBuilder, report: FidelityReport, config: FidelityConfig,
                       vectors: StatementVectors) -> list[FidelityReport]:
    """The method's headline beside the reference memories' (this user; stored, computed here when missing)."""
    try:
        with st.spinner("Reference memories…"):
            refs = reference_reports(dataset, builder.dataset, builder.user, builder.embedder, fidelity_store(),
                                     config=config, vectors=vectors, compute=writes_allowed())
    except Exception as e:
        log.exception("reference memories of user %s failed", builder.user.uid)
        st.error(f"Could not measure the reference memories: {md_escape(error_text(e))}")
        return []
    head = report.headline
    st.markdown(f"**Beside the reference memories** · headline as of {md_escape(head.sample_id if head else '—')} "
                "(the last history session)")
    if not refs:
        st.caption("This presentation holds no reference rows for this user (`pal memory fidelity` stores them).")
    st.dataframe(fc.compare_frame(report, refs, COMPARE), hide_index=True, width="stretch", key="mem_fid_refs")
    st.caption(fc.REFERENCE_NOTE)
    return refs


def stored_report(builder: MemoryBuilder, config: FidelityConfig) -> FidelityReport | None:
    """The stored report of exactly this memory and settings, else the newest of this build (read only)."""
    snapshots = load_snapshots(builder.store, builder.build_id, builder.user)
    exact = fidelity_store().get(fidelity_key(builder.build_id, snapshots, builder.embedder.name, config))
    if exact is not None:
        return exact
    same = [r for r in fidelity_store().reports(builder.dataset, builder.user.uid, builder.method)
            if r.build_id == builder.build_id and r.config == config]
    return same[-1] if same else None


def _measured_method(gold: MemoryBuilder, methods: list[str]) -> MemoryBuilder | None:
    """On the gold memory's page: which method to measure against it (built here when it needs no LLM)."""
    st.info(f"This is the gold memory ({ORACLE_LABEL}): against itself it scores 1.0 on every figure by construction. "
            "Pick a method to measure against it.")
    others = [m for m in methods if not is_oracle(m)]
    if not others:
        return None
    choice = st.selectbox("Measure", others, index=others.index(BASELINE) if BASELINE in others else 0,
                          key="mem_fid_method", format_func=method_label)
    try:
        builder = open_user_builder(gold.dataset, gold.user, choice)
    except Exception as e:
        log.exception("cannot open %s for user %s", choice, gold.user.uid)
        st.error(f"Cannot open {md_escape(choice)}: {md_escape(error_text(e))}")
        return None
    if builder.latest_stage() < builder.total_stages - 1:
        if get_method_class(choice).uses_llm:
            st.info(f"{md_escape(choice)} calls the LLM: build it on its own Memory page first (or with `pal memory "
                    "build`); figures cover the sessions built so far.")
            if builder.latest_stage() < 1:
                return None
        elif not writes_allowed():
            st.info(f"This presentation's {md_escape(choice)} memory is not built through the last session.")
            if builder.latest_stage() < 1:
                return None
        elif not run_build(builder):
            return None
    return builder


def _metric_value(value: float | int | None) -> str:
    return "n/a" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def _render_figures(builder: MemoryBuilder, report: FidelityReport, at: int) -> None:
    row = report.sessions[at]
    st.markdown(f"**As of {md_escape(row.sample_id)}** ({row.split}) · matches at cosine ≥ {report.threshold:g} "
                f"({md_escape(report.embedder)}) · {row.logs} logs, {row.requirements} gold requirements, "
                f"{row.preferences} gold preference sentences, {row.gold_statements} gold statements")
    for col, (name, label) in zip(st.columns(len(METRICS)), METRICS):
        value = getattr(row, name)
        col.metric(label, _metric_value(value), help=DEFINITIONS[name] + (
            f" n/a: {fc.na_reason(report, name)}" if value is None else ""))
    if report.unavailable:
        st.caption("n/a here: " + "; ".join(f"{md_escape(k)}: {md_escape(v)}" for k, v in report.unavailable.items()))
    st.plotly_chart(fc.fidelity_figure(report, row.sample_id), key="mem_fid_curves", width="stretch")
    st.caption(f"Dashed: the gold memory ({ORACLE_LABEL}), 1.0 by construction; dotted blue: the headline session (the "
               f"last history session); shaded: query sessions, where gold holds no query dialogue. Recall: share of "
               f"gold statements matched at τ = {report.threshold:g}; precision: share of the memory's distinct "
               "statements matching gold, each layer from its own statements (n/a for a layer the memory lacks); κ 0 = "
               "a log grouping no better than chance (one group per session scores 0).")
    left, right = st.columns([3, 2])
    with left:
        gold = gold_stages(builder.user)[dialogue_stage(at)]
        mine = {i.id: i for i in builder.store.items_as_of(builder.build_id, snapshot_stage(builder, at))}
        st.plotly_chart(fc.layer_counts_figure(gold, mine, builder.method), key="mem_fid_layers", width="stretch")
        st.caption(f"Items per layer as of {md_escape(row.sample_id)}: {md_escape(builder.method)} beside gold.")
    with right:
        st.dataframe({"aspect": list(row.background), "coverage": [_metric_value(v) for v in row.background.values()]},
                     hide_index=True, width="stretch", key="mem_fid_background")
        st.caption("Background coverage per aspect: " + md_escape(DEFINITIONS["background_coverage"]))


def _render_misses(report: FidelityReport) -> None:
    st.subheader("What the memory missed")
    final = report.headline or report.final
    as_of = md_escape(final.sample_id if final else "—")
    layers = list(dict.fromkeys(m.layer for m in report.misses))
    if not layers:
        st.success(f"Nothing: every gold item is matched as of {as_of}.")
        return
    counts = {layer: sum(m.layer == layer for m in report.misses) for layer in layers}
    shown = st.pills("Layers", layers, selection_mode="multi", default=[x for x in layers if x != "text"] or layers,
                     key="mem_fid_miss_layers", format_func=lambda x: f"{x} ({counts[x]})")
    st.dataframe(fc.misses_frame(report, list(shown or layers)), hide_index=True, width="stretch", key="mem_fid_misses",
                 column_config={"gold": st.column_config.TextColumn("gold", width="large"),
                                "best match": st.column_config.TextColumn("best match", width="large")})
    st.caption(f"As of {as_of} (the headline session): gold items whose best match in the "
               f"memory stays below τ = {report.threshold:g}, preferences remembered with the opposite polarity, and "
               "gold situations whose logs the memory split or merged. Text-level misses: the worst "
               f"{report.config.max_misses} at most.")


def _render_details(builder: MemoryBuilder, report: FidelityReport, refs: list[FidelityReport]) -> None:
    with st.expander("Per session"):
        st.dataframe(fc.sessions_frame(report), hide_index=True, width="stretch", key="mem_fid_sessions")
    with st.expander("Definitions"):
        st.markdown("\n".join(f"- {md_escape(line)}" for line in fc.definitions_markdown(report)))
    with st.expander("Judge-based variant (judge role)"):
        _render_judge(builder, report)
    # the JSON (a report and its references: megabytes) is made when the button is pressed, not on every view
    st.download_button("Export this fidelity report (JSON)", partial(fc.export_json, report, refs),
                       file_name=f"{report.fidelity_key}.json", mime="application/json", icon=":material/download:",
                       key="mem_fid_export", on_click="ignore")


def _render_judge(builder: MemoryBuilder, report: FidelityReport) -> None:
    st.caption("The judge reads each gold requirement and preference beside the memory's 5 closest statements and "
               "says stated, contradicted or absent (recall), and each distinct topic outline and principle of the "
               "memory beside gold's 5 closest statements and says supported or not (precision): one LLM call per "
               "statement (meaningful with a capable endpoint)."
               + (" The default reading here: the embedder cannot tell one need from another of the same user and "
                  "aspect (match precision under 0.9)." if report.default_matcher == "judge" else ""))
    if report.judge is not None:
        j = report.judge
        c1, c2, c3, c4, c5 = st.columns(5)
        c1.metric("Judge recall", _metric_value(j.recall), help="stated / judged (invalid answers left out)")
        c2.metric("Judge precision", _metric_value(j.precision),
                  help="supported / judged, over the memory's distinct topic outlines and principles (n/a without them)")
        c3.metric("Judge F1", _metric_value(j.f1))
        c4.metric("Contradicted", j.contradicted)
        c5.metric("Invalid", f"{j.invalid} / {j.statements}" + (f" · {j.precision_invalid} / {j.precision_statements}"
                                                               if j.precision_statements else ""))
        st.caption(f"Judge {md_escape(j.judge_model)} · prompt v{md_escape(j.prompt_version)}")
        st.dataframe([{k: v for k, v in d.items() if k != "evidence"} for d in j.verdicts], hide_index=True,
                     width="stretch", key="mem_fid_verdicts")
        if j.support:
            st.dataframe([{k: v for k, v in d.items() if k != "evidence"} for d in j.support], hide_index=True,
                         width="stretch", key="mem_fid_support")
    if not writes_allowed():
        read_only_note("the judge variant is not run here")
        return
    limit = int(st.number_input("Statements to judge", 1, 500, 20, key="mem_fid_judge_limit"))
    if st.button("Judge", key="mem_fid_judge", icon=":material/balance:"):
        from ui.platform_state import llm_client

        try:
            with st.spinner("Judging…"):
                judge_report(report, builder, llm_client(), fidelity_store(), limit=limit)
        except Exception as e:
            log.exception("fidelity judge failed for %s", report.fidelity_key)
            st.error(f"Judging stopped: {md_escape(error_text(e))}")
            return
        st.rerun()
