"""A trace as every page shows it: the tree of a run's, build's or judgment's LLM calls, with search and filters.

The pure builders (:func:`trace_frame`, :func:`index_frame`) turn records into tables the tests read; the
renderers draw them. Any page links to a trace with :func:`trace_url` (the Traces page opens ``?run=<id>``).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any
from urllib.parse import quote

import pandas as pd
import streamlit as st

from backends.trace import Span, TraceFilter, TraceTotals, filtered, trace_kind
from backends.trace_otlp import export_trace, grpc_exporter, otlp_endpoint
from evaluation.faireval import Judgment
from evaluation.traces import load_trace
from sim.types import RunRecord
from studio.workspace import Workspace
from ui.text import error_text, md_escape

log = logging.getLogger(__name__)
TRACE_PAGE = "traces"
TREE_COLUMNS = ["step", "kind", "role", "model", "prompt", "seconds", "tokens in", "cached", "tokens out", "cost $",
                "attempts", "asked again because", "error"]


def trace_url(run_id: str) -> str:
    """The Traces page's link to one run's trace (relative, so it works behind a proxy's path prefix)."""
    return f"{TRACE_PAGE}?run={quote(run_id, safe='')}"


def render_trace_link(run_id: str, label: str = "Trace of its LLM calls") -> None:
    st.page_link(f"pages/{TRACE_PAGE}.py", label=label, icon=":material/account_tree:", query_params={"run": run_id})


class WorkspaceSources:
    """The workspace's stores as :class:`evaluation.traces.TraceSources`."""

    def __init__(self, ws: Workspace):
        self.ws = ws

    def calls_of(self, run_id: str) -> list[dict]:
        return self.ws.runs.calls_of(run_id)

    def sim_run(self, run_id: str) -> RunRecord | None:
        if not self.ws.sims.exists(run_id):
            return None
        return self.ws.sims.load(run_id)

    def build_stages(self, build_id: str) -> list[dict] | None:
        if not self.ws.memory.build_rows([build_id]):
            return None
        return self.ws.memory.session_costs(build_id)

    def judgment(self, key: str) -> Judgment | None:
        return self.ws.evals.load_judgment(key) if self.ws.evals.has_judgment(key) else None


def build_trace(ws: Workspace, run_id: str) -> Span:
    """The trace of ``run_id`` from ``ws``'s records, priced by the workspace's price table."""
    return load_trace(WorkspaceSources(ws), run_id, cost=ws.config.cost)


def _fmt_reasons(reasons: list[str]) -> str:
    return " · ".join(reasons)


def trace_frame(root: Span) -> pd.DataFrame:
    """The tree as rows, parents first: a step's row (its calls' sums) then its calls, names indented by depth."""
    rows: list[dict[str, Any]] = []
    for depth, span in root.walk():
        t, called = span.totals, bool(span.totals.calls)
        rows.append({"step": "  " * depth + span.name, "kind": span.kind, "role": "", "model": "", "prompt": "",
                     "seconds": round(span.end - span.start, 2) if span.end else None,
                     "tokens in": t.tokens_in if called else None,
                     "cached": t.tokens_cached if t.tokens_reported else None,
                     "tokens out": t.tokens_out if called else None, "cost $": t.cost_usd if called else None,
                     "attempts": span.attrs.get("attempts"),
                     "asked again because": _fmt_reasons(span.retry_reasons), "error": ""})
        for call in span.calls:
            rows.append({"step": "  " * (depth + 1) + f"↳ {call.prompt_name or call.role}", "kind": "call",
                         "role": call.role, "model": call.model, "prompt": call.prompt_name or "",
                         "seconds": round(call.latency_ms / 1000, 2), "tokens in": call.tokens_in,
                         "cached": call.tokens_cached, "tokens out": call.tokens_out, "cost $": call.cost_usd,
                         "attempts": call.attempts,
                         "asked again because": "cached answer" if call.cache_hit else "",
                         "error": call.error or ""})
    return pd.DataFrame(rows, columns=TREE_COLUMNS)


def index_frame(rows: list[dict], flt: TraceFilter | None = None, kinds: list[str] | None = None) -> pd.DataFrame:
    """The traces' index (:meth:`backends.store.runstore.RunStore.run_summaries` rows): a row per run, its kind,
    calls, failures, retries, tokens and cached share, filtered by text (run id, role, model), kind, role and
    model, failed or retried runs only."""
    out = []
    flt = flt or TraceFilter()
    needle = flt.text.strip().lower()
    for r in rows:
        roles = sorted(str(r["roles"] or "").split(","))
        models = sorted(str(r["models"] or "").split(","))
        kind = trace_kind(str(r["run_id"]), roles)
        if kinds and kind not in kinds or flt.roles and not set(flt.roles) & set(roles):
            continue
        if flt.models and not set(flt.models) & set(models) or flt.errors_only and not r["errors"]:
            continue
        if flt.retried_only and not r["retried"]:
            continue
        if needle and needle not in " ".join([str(r["run_id"]), *roles, *models]).lower():
            continue
        tin = int(r["tokens_in"] or 0)
        out.append({"run": r["run_id"], "kind": kind, "roles": ", ".join(roles), "models": ", ".join(models),
                    "calls": r["calls"], "failed": r["errors"], "retried": r["retried"], "tokens in": tin,
                    "cached %": round(100 * (r["tokens_cached"] or 0) / tin, 1) if tin and r["tokens_cached"]
                    is not None else None, "tokens out": r["tokens_out"], "LLM s": round(r["llm_s"] or 0, 1),
                    "ended": datetime.fromtimestamp(float(r["ended"])).strftime("%Y-%m-%d %H:%M")})
    return pd.DataFrame(out, columns=["run", "kind", "roles", "models", "calls", "failed", "retried", "tokens in",
                                      "cached %", "tokens out", "LLM s", "ended"])


def render_totals(t: TraceTotals) -> None:
    c = st.columns(6)
    c[0].metric("LLM calls", t.calls)
    c[1].metric("Failed", t.errors)
    c[2].metric("Retried", t.retried, help="calls that took more than one attempt at the endpoint")
    c[3].metric("Tokens in / out", f"{t.tokens_in:,} / {t.tokens_out:,}")
    share = t.cached_share
    c[4].metric("Prompt cached", "—" if share is None else f"{share:.0%}",
                help="share of prompt tokens the endpoint served from its cache, over the calls that said")
    c[5].metric("Cost", "unpriced" if t.cost_usd is None else f"${t.cost_usd:.4f}",
                help="from [prices.<model>] in secrets.toml; local models are free")


def trace_filter_widgets(root: Span, key: str) -> TraceFilter:
    calls = root.all_calls()
    c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
    text = c1.text_input("Search calls", key=f"{key}_q", placeholder="prompt, role, model, error, reason")
    roles = c2.multiselect("Role", sorted({c.role for c in calls}), key=f"{key}_roles")
    models = c3.multiselect("Model", sorted({c.model for c in calls}), key=f"{key}_models")
    errors = c4.checkbox("Failed only", key=f"{key}_err")
    retried = c4.checkbox("Asked again only", key=f"{key}_retry")
    return TraceFilter(text=text, roles=roles, models=models, errors_only=errors, retried_only=retried)


def render_trace(ws: Workspace, run_id: str, key: str = "trace") -> None:
    """One run's trace: sums, filters, the tree as a table, its timeline; JSON download; OTLP export if set."""
    try:
        root = build_trace(ws, run_id)
    except KeyError as e:
        log.info("no trace for %s: %s", run_id, e)
        st.info(f"Nothing recorded under `{md_escape(run_id)}`.")
        return
    st.markdown(f"**{md_escape(root.name)}**  \n:gray[run {md_escape(run_id)}]")
    if ended := root.attrs.get("ended"):
        st.caption(f"Ended: {md_escape(ended)}")
    render_totals(root.totals)
    shown = filtered(root, trace_filter_widgets(root, key))
    frame = trace_frame(shown)
    st.dataframe(frame, hide_index=True, width="stretch", key=f"{key}_tree", height=min(36 + 35 * len(frame), 720),
                 column_config={"step": st.column_config.TextColumn("step", width="large")})
    st.caption(f"{len(shown.all_calls())} of {root.totals.calls} call(s) shown. Calls are filed under the step "
               "stored next after them for their role; a call no step claims stays at the top.")
    c1, c2 = st.columns(2)
    c1.download_button("Download trace (JSON)", json.dumps(root.model_dump(), ensure_ascii=False, indent=1),
                       file_name=f"trace-{run_id}.json", mime="application/json", key=f"{key}_json",
                       icon=":material/download:")
    if endpoint := otlp_endpoint():
        if c2.button(f"Send to OTLP {endpoint}", key=f"{key}_otlp", icon=":material/upload:"):
            try:
                sent = export_trace(root, grpc_exporter(endpoint))
                st.success(f"Sent {sent} span(s) to {md_escape(endpoint)}.")
            except (RuntimeError, OSError, ValueError) as e:
                log.warning("OTLP export of %s to %s failed: %s", run_id, endpoint, e)
                st.error(error_text(e))
    else:
        c2.caption("OpenTelemetry export: set `PAL_OTLP_ENDPOINT` (an OTLP gRPC collector: Langfuse, Phoenix).")
