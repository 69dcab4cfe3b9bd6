"""Data behind the Evaluate page: stored judgments and results as frames, exports and the outcome chart.

Pure functions over records (no widgets), so the page stays layout and these are unit-testable.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Sequence

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from backends.csvsafe import neutralise
from evaluation.aggregate import aggregate_judgments
from evaluation.faireval import ASPECTS, Judgment
from evaluation.faireval_stats import OUTCOMES, judgment_position
from evaluation.service import DroppedTopic
from evaluation.takeaway_words import Language, cell_text, estimate_of, figure_label
from evaluation.tasks import TaskResult
from evaluation.versions import metric_versions, versions_text
from memory.methods import display_name
from sim.store import SimStore
from ui.platform_state import base_workspace

OUTCOME_COLOURS = {"win": "#2e7d32", "tie": "#9e9e9e", "lose": "#c62828"}
# the single-turn board's figures, metrics first (readable names: :func:`evaluation.takeaway_words.figure_label`)
LEADER_FIGURES = ("g_score", "s_score", *(f"{task}_bleu{n}" for task in ("restatement", "proposal") for n in (1, 2, 3, 4)))
LEADER_COLUMNS = [(figure_label(key), key) for key in LEADER_FIGURES]


@st.cache_data(max_entries=32, show_spinner=False)
def pair_aggregates(fingerprint: str, threshold: float, _judgments: list[Judgment],
                    _dropped: list[DroppedTopic]) -> list[dict]:
    """:func:`evaluation.aggregate.aggregate_judgments` (cluster-bootstrap CIs of every rate), kept per record
    fingerprint (:func:`judgments_fingerprint`) so a rerun that changes no judgment draws no bootstrap again."""
    return aggregate_judgments(_judgments, threshold, dropped=_dropped)


def judgments_fingerprint(judgments: Sequence[Judgment], dropped: Sequence[DroppedTopic]) -> str:
    """A digest of the shown judgments (in full, decisions as recomputed) and the dropped topics."""
    digest = hashlib.sha1()
    for j in judgments:
        digest.update(j.model_dump_json().encode())
    for d in dropped:
        digest.update(json.dumps(vars(d), sort_keys=True, default=str).encode())
    return digest.hexdigest()


def finished_methods(sims: SimStore, dkey: str) -> list[str]:
    """Methods with at least one finished simulation run in this dataset."""
    return sorted({r["method"] for r in sims.list(dataset=dkey, status="finished")})


def latest_judgments(judgments: Iterable[Judgment]) -> list[Judgment]:
    """The newest judgment per (user, sample, topic, aspect): re-judging with other settings replaces the shown one."""
    newest: dict[tuple[str, str, str, str], Judgment] = {}
    for j in judgments:  # oldest first
        newest[(j.user_id, j.sample_id, j.topic_key, j.aspect)] = j
    return sorted(newest.values(), key=lambda j: (j.user_id, j.sample_id, j.topic_key, j.aspect))


def stored_results(dkey: str) -> list[TaskResult]:
    """Stored single-turn bench results of this dataset; the newest per (topic, method, task)."""
    return base_workspace().evals.results(dkey)


def topic_id(j: Judgment) -> str:
    return f"{j.sample_id}_{j.topic_key}"


def arm_shares(j: Judgment) -> dict[str, float | int | None]:
    """Each arm's simulated user turns and the shares of them intervened in and composed (None: not recorded)."""
    return {f"{arm}_{name}": (getattr(j.interventions[arm], name) if arm in j.interventions else None)
            for arm in ("a", "b") for name in ("user_turns", "intervention_share", "composed_share")}


def judgments_frame(judgments: list[Judgment]) -> pd.DataFrame:
    """One row per judgment (topic × aspect), flat, for the export."""
    rows = [{"user_id": j.user_id, "sample_id": j.sample_id, "topic_key": j.topic_key, "aspect": j.aspect,
             "method_a": j.method_a, "method_b": j.method_b, "run_a": j.run_a, "run_b": j.run_b,
             "decision": j.decision, "mean_a": j.mean_a, "mean_b": j.mean_b, "flipped": j.flipped,
             "order1_winner": j.order1_winner, "order2_winner": j.order2_winner, "invalid": j.invalid,
             **judgment_position(j),
             "k": j.k, "threshold": j.threshold, "judge_model": j.judge_model, "prompt_name": j.prompt_name,
             "prompt_version": j.prompt_version, "temperature": j.judge_temperature, "seed": j.seed,
             "judgment_key": j.judgment_key, "metric_versions": versions_text("faireval_decision", "faireval_summary"),
             **arm_shares(j)}
            for j in judgments]
    return pd.DataFrame(rows)


def dropped_frame(dropped: list[DroppedTopic]) -> pd.DataFrame:
    """One row per topic that could not be judged (no finished run of both methods), with the reason."""
    return pd.DataFrame([{"user": d.user_id, "sample": d.sample_id, "topic": d.topic_key, d.method_a: d.status_a,
                          d.method_b: d.status_b, "error": d.error} for d in dropped])


def topics_frame(judgments: list[Judgment]) -> pd.DataFrame:
    """One row per judged topic: decision per aspect and whether any aspect flipped under the swap."""
    by_topic: dict[tuple[str, str, str], dict] = {}
    for j in judgments:
        row = by_topic.setdefault((j.user_id, j.sample_id, j.topic_key),
                                  {"user": j.user_id, "sample": j.sample_id, "topic": j.topic_key,
                                   **{a: "" for a in ASPECTS}, "flipped": False})
        row[j.aspect] = j.decision
        row["flipped"] = row["flipped"] or j.flipped
    columns = ["user", "sample", "topic", *ASPECTS, "flipped"]
    return pd.DataFrame(list(by_topic.values()), columns=columns)


def aggregates_frame(rows: list[dict]) -> pd.DataFrame:
    out = []
    for r in rows:
        lo, hi = r["adjusted_win_rate_ci"]
        lb = r["length_bias"]
        out.append({"method_a": display_name(r["method_a"]), "method_b": display_name(r["method_b"]), "aspect": r["aspect"], "n": r["n"],
                    "win": r["win"], "tie": r["tie"], "lose": r["lose"], "invalid": r["invalid"],
                    "dropped": r.get("dropped", 0), "topics": r.get("topics"),
                    **{f"{d}_share_all": r.get(f"{d}_share_all") for d in OUTCOMES},
                    "adjusted_win_rate": r["adjusted_win_rate"], "ci_low": lo, "ci_high": hi,
                    "ci_method": r.get("ci_method", "percentile bootstrap over judgments"), "users": r.get("users"),
                    "ci_note": r.get("ci_note", ""),
                    "position_consistency": r.get("position_consistency"),
                    "position_decided_share": r.get("position_decided_share"),
                    "median_margin_decided": r.get("median_margin_decided"), "thin_share": r.get("thin_share"),
                    "identical_orders": r.get("identical_orders"), "orders_with_samples": r.get("orders_with_samples"),
                    "flip_rate": r["flip_rate"], "slot1_win_rate": r["slot1_win_rate"],
                    "longer_win_rate": lb["longer_win_rate"], "longer_decided": lb["longer_decided"],
                    **{f"length_diff_{v}": lb["length_diff"][v] for v in ("win", "tie", "lose")},
                    "invalid_samples": r["invalid_samples"], "samples": r["samples"], "threshold": r["threshold"],
                    "metric_versions": r.get("metric_versions", "")})
    return pd.DataFrame(out)


def outcomes_frame(rows: list[dict], language: Language = "en") -> pd.DataFrame:
    """The FairEval outcomes as people read them: per aspect each outcome's count and share with its 95% CI, the
    win rate with ties as half with its CI, then the counts behind them (the full aggregates stay in the export)."""
    out = []
    for r in rows:
        row: dict = {"aspect": r["aspect"]}
        for outcome in ("win", "tie", "lose"):
            name = f"{outcome}_rate"
            share = estimate_of({"value": r[name], "ci": r.get(f"{name}_ci") or [None, None], "n": r["n"]})
            row[figure_label(name, language)] = f"{r[outcome]} · {cell_text(name, share)}"
        adjusted = estimate_of({"value": r["adjusted_win_rate"], "ci": r["adjusted_win_rate_ci"], "n": r["n"]})
        row[figure_label("win_rate_adjusted", language)] = cell_text("win_rate_adjusted", adjusted)
        row.update({"decided topics": r["n"], "invalid": r["invalid"], "dropped": r.get("dropped", 0),
                    "users": r.get("users")})
        out.append(row)
    return pd.DataFrame(out)


def with_versions(frame: pd.DataFrame, *metrics: str) -> pd.DataFrame:
    """The frame with a ``metric_versions`` column (for exports that do not carry one per row)."""
    return frame.assign(metric_versions=versions_text(*metrics)) if len(frame) else frame


def to_csv(frame: pd.DataFrame) -> str:
    """CSV with formula-like text cells neutralised (see :mod:`backends.csvsafe`)."""
    buf = io.StringIO()
    safe = frame.map(neutralise) if len(frame) else frame
    safe.to_csv(buf, index=False, quoting=csv.QUOTE_NONNUMERIC)
    return buf.getvalue()


def to_jsonl(judgments: list[Judgment], aggregates: list[dict], dropped: Sequence[DroppedTopic] = ()) -> str:
    """The metric versions, every shown judgment in full, every aggregate row and every dropped topic,
    one JSON object a line."""
    lines = [json.dumps({"type": "metric_versions", **metric_versions()})]
    lines += [json.dumps({"type": "judgment", **j.model_dump(mode="json")}, ensure_ascii=False) for j in judgments]
    lines += [json.dumps({"type": "aggregate", **a}, ensure_ascii=False, default=str) for a in aggregates]
    lines += [json.dumps({"type": "dropped", **vars(d), "reason": d.reason}, ensure_ascii=False) for d in dropped]
    return "\n".join(lines) + "\n"


def _ci_arms(rows: list[dict], outcome: str) -> tuple[list[float], list[float]]:
    """(plus, minus) whiskers of each row's ``outcome`` share from its stored 95% CI (0 where none is stored)."""
    plus, minus = [], []
    for r in rows:
        value = r[f"{outcome}_rate"]
        lo, hi = (list(r.get(f"{outcome}_rate_ci") or [None, None]) + [None, None])[:2]
        ok = lo is not None and hi is not None and lo == lo and hi == hi
        plus.append(max(0.0, hi - value) if ok else 0.0)
        minus.append(max(0.0, value - lo) if ok else 0.0)
    return plus, minus


def outcome_figure(rows: list[dict], method_a: str, method_b: str) -> go.Figure:
    """Win/tie/lose shares per aspect (A's view) side by side, each with its 95% cluster-bootstrap CI over users,
    and the adjusted win rate (ties as half) with its CI as a diamond."""
    fig = go.Figure()
    aspects = [r["aspect"] for r in rows]
    for outcome in ("win", "tie", "lose"):
        plus, minus = _ci_arms(rows, outcome)
        fig.add_bar(y=aspects, x=[r[f"{outcome}_rate"] for r in rows], name=figure_label(f"{outcome}_rate"),
                    orientation="h", marker_color=OUTCOME_COLOURS[outcome],
                    text=[f"{r[outcome]} ({r[f'{outcome}_rate']:.0%})" for r in rows], textposition="inside",
                    customdata=[r[outcome] for r in rows],
                    error_x={"type": "data", "symmetric": False, "array": plus, "arrayminus": minus,
                             "color": "#374151", "thickness": 1.5, "width": 4},
                    hovertemplate=f"{outcome}: %{{customdata}} (%{{x:.0%}})<extra></extra>")
    adj = [r["adjusted_win_rate"] for r in rows]
    lo = [r["adjusted_win_rate_ci"][0] for r in rows]
    hi = [r["adjusted_win_rate_ci"][1] for r in rows]
    fig.add_scatter(y=aspects, x=adj, mode="markers", name="adjusted win rate (95% CI)",
                    marker={"color": "black", "symbol": "diamond", "size": 10},
                    error_x={"type": "data", "symmetric": False, "array": [h - a for h, a in zip(hi, adj)],
                             "arrayminus": [a - low for a, low in zip(adj, lo)], "color": "black", "thickness": 2},
                    hovertemplate="adjusted win rate %{x:.3f}<extra></extra>")
    fig.add_vline(x=0.5, line={"dash": "dot", "color": "#6b7280", "width": 1})  # even: the two cannot be told apart
    for aspect, a, low, high in zip(aspects, adj, lo, hi):
        fig.add_annotation(y=aspect, x=1.0, xanchor="left", showarrow=False, xshift=6,
                           text=f"{a:.2f} [{low:.2f}, {high:.2f}]")
    fig.update_layout(barmode="group", height=140 + 110 * len(rows), margin={"l": 10, "r": 130, "t": 30, "b": 30},
                      xaxis={"range": [0, 1], "tickformat": ".0%", "title": f"share of topics ({method_a} vs {method_b})"},
                      legend={"orientation": "h", "y": 1.15})
    return fig


def _cell(m: dict, digits: int = 1) -> str:
    lo, hi = m["ci"]
    return f"{m['value']:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]" if m["n"] else "–"


def leaderboard_frame(rows: list[dict]) -> pd.DataFrame:
    out = []
    for r in rows:
        row = {"method": display_name(r["method"]), **{name: _cell(r[key]) for name, key in LEADER_COLUMNS},
               "topics": r["restatement_bleu1"]["n"] or r["s_score"]["n"],
               "invalid": r["restatement_invalid"] + r["proposal_invalid"] + r["selection_invalid"],
               "G judge failed": r.get("g_judge_failed", 0)}
        out.append(row)
    return pd.DataFrame(out, columns=["method", *(n for n, _ in LEADER_COLUMNS), "topics", "invalid", "G judge failed"])
