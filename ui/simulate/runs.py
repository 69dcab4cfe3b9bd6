"""The Simulate page's runs list: every stored run of the dataset; a selected row opens it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from memory.methods import display_name
from palset.dataset import Dataset, dataset_key
from ui.platform_state import base_workspace


def runs_frame(rows: list[dict]) -> pd.DataFrame:
    columns = ["run_id", "user_id", "sample_id", "topic_key", "method", "mode", "seed", "status", "turns",
               "utterances", "updated"]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame["turns"] = (frame["utterances"] + 1) // 2
    frame["updated"] = pd.to_datetime(frame["updated_at"], unit="s")
    frame["method"] = frame["method"].map(display_name)
    return frame[columns]


def _open_selected_run(ids: list[str], tab_key: str, tab: str) -> None:
    """Runs table callback: a selected row opens that run (read-only, or live if this session drives it)."""
    rows = (st.session_state.get("sim_runs_table") or {}).get("selection", {}).get("rows", [])
    if rows and rows[0] < len(ids):
        st.query_params["run"] = ids[rows[0]]
        st.session_state[tab_key] = tab


def render_runs(dataset: Dataset, tab_key: str, tab: str) -> None:
    """Every stored run of this dataset, newest first; select one to replay or resume it."""
    rows = base_workspace().sims.list(dataset=dataset_key(dataset.root))
    if not rows:
        st.info("No simulation runs for this dataset yet: start one on the Simulation tab.")
        return
    frame = runs_frame(rows)
    ids = list(frame["run_id"])
    st.caption(f"{len(rows)} run(s). Select a row to open it; unfinished runs can be resumed from there.")
    st.dataframe(frame, hide_index=True, width="stretch", key="sim_runs_table", selection_mode="single-row",
                 on_select=lambda: _open_selected_run(ids, tab_key, tab),
                 column_config={"updated": st.column_config.DatetimeColumn("updated", format="YYYY-MM-DD HH:mm")})
