"""The Evaluate page's fidelity leaderboard: every stored fidelity report of the dataset, per method across users
with 95% bootstrap CIs over users at each user's last history session, under the reference memories' rows
(empty, one group per session, full history, another user, generic statements, gold itself) measured by the same
code; a button that measures stale reports again under the current definition; and a form that measures methods for
users (building those without an LLM first) with their references."""

from __future__ import annotations

import logging

import streamlit as st

from evaluation.fidelity import DEFINITIONS
from evaluation.fidelity.compute import StatementVectors
from evaluation.fidelity.references import is_reference
from evaluation.fidelity.service import measure_build, reference_reports
from evaluation.fidelity.types import FidelityConfig, FidelityReport
from evaluation.takeaway_words import figure_label
from evaluation.takeaways import fidelity_board, primary_measurement
from memory.methods import ORACLE_LABEL, get_method_class
from palset.dataset import Dataset
from ui.charts import build_estimates_figure
from ui.evaluate.data import to_csv
from ui.evaluate.takeaway import board_language, dataset_arg, render_references, render_takeaway
from ui.fidelity import REFERENCE_NOTE, board_frame, layer_series, readable_board
from ui.methods import available_methods, method_label, open_user_builder
from ui.platform_state import base_workspace
from ui.presenting import read_only_note, writes_allowed
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)
DEFAULT_METHODS = ["gold", "rag-turn", "rag-session", "vanilla-log"]
__all__ = ["board_frame", "measure_many", "render_fidelity_board"]


def missing_references(reports: list[FidelityReport]) -> list[tuple[str, str, float]]:
    """(user, embedder, τ) of method reports with no reference row of the same measurement stored."""
    have = {(r.user_id, r.embedder, r.threshold) for r in reports if is_reference(r.method) and not r.stale}
    want = {(r.user_id, r.embedder, r.threshold) for r in reports if not is_reference(r.method) and not r.stale}
    return sorted(want - have)


def stale_measurements(reports: list[FidelityReport]) -> list[tuple[str, str]]:
    """(user, method) of the method reports measured under an older definition with no current report beside them."""
    current = {(r.user_id, r.method) for r in reports if not r.stale}
    return sorted({(r.user_id, r.method) for r in reports
                   if r.stale and not is_reference(r.method) and (r.user_id, r.method) not in current})


def render_fidelity_board(dataset: Dataset, dkey: str) -> None:
    reports, revision = base_workspace().fidelity.latest_with_revision(dkey)
    language = board_language(dataset)
    rows, takeaway = fidelity_board(reports, revision, language, dataset_arg(dataset))
    if render_takeaway(takeaway, "eval_fidelity"):
        stale = [r for r in rows if r["stale"]]
        if stale:
            where = ("below, on the Memory page's Fidelity tab or with `pal memory fidelity`" if writes_allowed() else
                     "in a home of your own (`pal workspace import` the bundle, then the button here or "
                     "`pal memory fidelity`): this presentation shows its reports as recorded")
            st.warning(f"{len(stale)} row(s) were measured under an older definition of fidelity (marked stale, their "
                       f"figures as that version defined them): measure them again {where}.")
        key = primary_measurement(rows)
        figure = takeaway.headlines[0].figure if takeaway.headlines else None
        series, layers = layer_series(rows, key, language)
        if series:
            st.plotly_chart(build_estimates_figure(series, layers, title=f"{key[0]} · τ {key[1]:g}" if key else ""),
                            key="eval_fidelity_chart", width="stretch")
        st.dataframe(readable_board(rows, language, first=figure), hide_index=True, width="stretch",
                     key="eval_fidelity_board")
        render_references(takeaway, readable_board(rows, language, references=True, first=figure),
                          "eval_fidelity_refs", f"Reference rows ({len(takeaway.references)}): what a method must "
                          "beat, measured by the same code")
        st.caption(f"{REFERENCE_NOTE} Each user's last history session (gold holds no query dialogue); mean over users "
                   "with the 95% bootstrap CI over users in brackets; two methods whose intervals overlap cannot be "
                   "told apart. Matches at cosine ≥ τ (its ROC AUC on held-out pairs beside it). n/a: not measurable, "
                   "left out of every mean (reasons under 'not measured'); stale: measured under an older "
                   "definition.")
        with st.expander("What each figure means"):
            st.markdown("\n".join(f"- **{md_escape(figure_label(k))}**: {md_escape(v)}" for k, v in DEFINITIONS.items()))
        st.download_button("Fidelity leaderboard CSV", lambda: to_csv(board_frame(rows)), file_name="fidelity_leaderboard.csv",
                           mime="text/csv", icon=":material/download:", key="eval_fidelity_csv", on_click="ignore")
    if not writes_allowed():
        read_only_note("fidelity is not measured here; the table shows the bundle's reports")
        return
    outdated = stale_measurements(reports)
    if outdated and st.button(f"Measure the {len(outdated)} stale report(s) again under the current definition",
                           key="eval_fid_stale", icon=":material/refresh:",
                           help="Recomputes each stale (user, method) from its stored build, with the user's reference "
                                "rows; the older reports stay stored and readable under their version."):
        notes = []
        for uid in dict.fromkeys(u for u, _ in outdated):
            notes += measure_many(dataset, dkey, [m for u, m in outdated if u == uid], [uid])
        for note in notes:
            st.warning(md_escape(note))
        if not notes:
            st.rerun()
    missing = missing_references(reports)
    if missing and st.button(f"Measure the reference rows for {len({u for u, _, _ in missing})} user(s)",
                             key="eval_fid_refs", icon=":material/straighten:",
                             help="Methods were measured without their reference memories (older reports or "
                                  "--no-references): measure them for the same users, embedder and τ."):
        notes = measure_references(dataset, dkey, missing)
        for note in notes:
            st.warning(md_escape(note))
        if not notes:
            st.rerun()
    with st.expander("Measure fidelity"):
        methods = st.multiselect("Methods", available_methods(), key="eval_fid_methods", format_func=method_label,
                                 default=[m for m in DEFAULT_METHODS if m in available_methods()])
        users = st.multiselect("Users (empty: all)", list(dataset.users), key="eval_fid_users")
        st.caption(f"Methods without an LLM are built first (seconds to a minute per user); an LLM method is measured "
                   f"only where it is already built (Memory page or `pal memory build`). The reference rows of each "
                   f"user are measured too; gold is the {ORACLE_LABEL}.")
        if st.button("Measure", key="eval_fid_run", icon=":material/straighten:", disabled=not methods):
            notes = measure_many(dataset, dkey, methods, users or list(dataset.users))
            for note in notes:
                st.warning(md_escape(note))
            if not notes:
                st.rerun()


def measure_references(dataset: Dataset, dkey: str, missing: list[tuple[str, str, float]]) -> list[str]:
    """The reference rows of each (user, embedder, τ) that a method report has and they lack."""
    notes: list[str] = []
    ws = base_workspace()
    for uid, embedder, tau in missing:
        user = dataset.users.get(uid)
        if user is None:
            continue
        try:
            emb = ws.embedder(embedder, user.language)
            config = FidelityConfig(threshold=None if tau == FidelityConfig().threshold_for(embedder) else tau)
            reference_reports(dataset, dkey, user, emb, ws.fidelity, config=config)
        except Exception as e:
            log.exception("reference memories of user %s failed", uid)
            notes.append(f"reference rows for user {uid}: {error_text(e)}")
    return notes


def measure_many(dataset: Dataset, dkey: str, methods: list[str], users: list[str]) -> list[str]:
    """Measure each method for each user, then the user's reference memories (statement vectors shared per
    user); returns what was skipped and why."""
    notes: list[str] = []
    bar = st.progress(0.0, text="Measuring fidelity…")
    total, done = len(methods) * len(users), 0
    for uid in users:
        user = dataset.users[uid]
        if not user.sessions:
            notes.append(f"user {uid} has no sessions in this dataset")
            continue
        shared: dict[str, StatementVectors] = {}
        for method in methods:
            done += 1
            bar.progress(done / total, text=f"[{done}/{total}] {method} for user {uid}")
            try:
                builder = open_user_builder(dkey, user, method)
                if builder.latest_stage() < builder.total_stages - 1:
                    if get_method_class(method).uses_llm:
                        notes.append(f"{method} for user {uid}: not fully built (it calls the LLM); build it first")
                        continue
                    builder.run()
                vectors = shared.setdefault(builder.embedder.name, StatementVectors(builder.embedder))
                measure_build(builder, base_workspace().fidelity, vectors=vectors)
            except Exception as e:
                log.exception("fidelity of %s for user %s failed", method, uid)
                notes.append(f"{method} for user {uid}: {error_text(e)}")
        for name, vectors in shared.items():
            bar.progress(done / total, text=f"reference memories of user {uid} ({name})")
            try:
                reference_reports(dataset, dkey, user, vectors.embedder, base_workspace().fidelity, vectors=vectors)
            except Exception as e:
                log.exception("reference memories of user %s failed", uid)
                notes.append(f"reference rows for user {uid}: {error_text(e)}")
    bar.empty()
    return notes
