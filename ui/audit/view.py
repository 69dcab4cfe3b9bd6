"""The Audit page (admins): who edited or forgot memory items, created batches, changed settings or added
accounts, and when; filterable and exportable (CSV with formulas neutralised, or JSON lines)."""

from __future__ import annotations

import json
from datetime import datetime

import pandas as pd
import streamlit as st

from backends.csvsafe import frame_to_csv
from backends.store.audit import ACTIONS, AuditEntry, AuditStore


def audit_frame(entries: list[AuditEntry]) -> pd.DataFrame:
    rows = [{"time": datetime.fromtimestamp(e.ts).strftime("%Y-%m-%d %H:%M:%S"), "actor": e.actor,
             "action": e.action, "target": e.target, "detail": json.dumps(e.detail, ensure_ascii=False)}
            for e in entries]
    return pd.DataFrame(rows, columns=["time", "actor", "action", "target", "detail"])


def render_audit(store: AuditStore) -> None:
    st.title("Audit")
    st.caption("Every change people made through the app or `pal users`: newest first.")
    c1, c2 = st.columns(2)
    action = c1.selectbox("Action", ["(all)", *ACTIONS], key="audit_action",
                          format_func=lambda a: a if a == "(all)" else f"{a} · {ACTIONS[a]}")
    actor = c2.text_input("Actor", key="audit_actor", placeholder="any")
    entries = store.entries(limit=5000, actor=actor.strip() or None, action=None if action == "(all)" else action)
    if not entries:
        st.info("Nothing recorded yet." if action == "(all)" and not actor else "No entry matches.")
        return
    frame = audit_frame(entries)
    st.dataframe(frame, hide_index=True, width="stretch")
    c1, c2 = st.columns(2)
    c1.download_button("Export CSV", frame_to_csv(frame), file_name="pal-audit.csv", mime="text/csv",
                       key="audit_csv", icon=":material/download:")
    c2.download_button("Export JSONL", "".join(e.model_dump_json() + "\n" for e in entries),
                       file_name="pal-audit.jsonl", mime="application/jsonl", key="audit_jsonl",
                       icon=":material/download:")
