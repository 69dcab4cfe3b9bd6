"""The Evaluate page's fidelity leaderboard: every stored fidelity report of the dataset, per method across users
with 95% bootstrap CIs over users, the gold memory (oracle upper bound) first; and a form that measures
methods for users (building those without an LLM first)."""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from evaluation.fidelity import DEFINITIONS, HEADLINE
from evaluation.fidelity.board import leaderboard
from evaluation.fidelity.compute import StatementVectors
from evaluation.fidelity.service import measure_build
from memory.methods import ORACLE_LABEL, display_name, get_method_class
from palset.dataset import Dataset
from ui.evaluate.data import to_csv
from ui.methods import available_methods, method_label, open_user_builder
from ui.platform_state import base_workspace
from ui.presenting import read_only_note, writes_allowed
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)
DEFAULT_METHODS = ["gold", "rag-turn", "rag-session", "vanilla-log"]


def _cell(m: dict) -> str:
    if m["value"] is None:
        return "–"
    lo, hi = m["ci"]
    return f"{m['value']:.3f} [{lo:.3f}, {hi:.3f}]"


def board_frame(rows: list[dict]) -> pd.DataFrame:
    """One row per (method, embedder, τ): each headline figure as "mean [CI low, CI high]" over users."""
    out = [{"method": display_name(r["method"]), "embedder": r["embedder"], "τ": r["threshold"],
            "users": len(r["users"]), **{name: _cell(r[name]) for name in HEADLINE}} for r in rows]
    return pd.DataFrame(out, columns=["method", "embedder", "τ", "users", *HEADLINE])


def render_fidelity_board(dataset: Dataset, dkey: str) -> None:
    rows = leaderboard(base_workspace().fidelity.latest(dkey))
    if rows:
        frame = board_frame(rows)
        st.dataframe(frame, hide_index=True, width="stretch", key="eval_fidelity_board")
        st.caption(f"Last session of each user's build, mean over users with the 95% bootstrap CI over users; matches "
                   f"at cosine ≥ τ. gold is the {ORACLE_LABEL} (1.0 by construction). Figures: "
                   + md_escape(" ".join(f"{k}: {v}" for k, v in DEFINITIONS.items())))
        st.download_button("Fidelity leaderboard CSV", to_csv(frame), file_name="fidelity_leaderboard.csv",
                           mime="text/csv", icon=":material/download:", key="eval_fidelity_csv", on_click="ignore")
    else:
        st.info("No fidelity measured for this dataset yet: measure methods below, on the Memory page's Fidelity tab, "
                "or with `pal memory fidelity`.")
    if not writes_allowed():
        read_only_note("fidelity is not measured here; the table shows the bundle's reports")
        return
    with st.expander("Measure fidelity"):
        methods = st.multiselect("Methods", available_methods(), key="eval_fid_methods", format_func=method_label,
                                 default=[m for m in DEFAULT_METHODS if m in available_methods()])
        users = st.multiselect("Users (empty: all)", list(dataset.users), key="eval_fid_users")
        st.caption("Methods without an LLM are built first (seconds to a minute per user); an LLM method is measured "
                   "only where it is already built (Memory page or `pal memory build`).")
        if st.button("Measure", key="eval_fid_run", icon=":material/straighten:", disabled=not methods):
            notes = measure_many(dataset, dkey, methods, users or list(dataset.users))
            for note in notes:
                st.warning(md_escape(note))
            if not notes:
                st.rerun()


def measure_many(dataset: Dataset, dkey: str, methods: list[str], users: list[str]) -> list[str]:
    """Measure each method for each user (statement vectors shared per user); returns what was skipped and why."""
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
    bar.empty()
    return notes
