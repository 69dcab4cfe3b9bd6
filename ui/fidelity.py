"""Figures and tables of memory fidelity (pure: reports and items in, plotly figures and frames out).

Every figure names the threshold it was measured at; the gold memory is drawn as the oracle upper bound
(1.0 on every fidelity figure, by construction)."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import plotly.graph_objects as go

from evaluation.fidelity import DEFINITIONS, HEADLINE
from evaluation.fidelity.types import FidelityReport
from memory.methods import ORACLE_LABEL
from memory.types import MemoryItem

CURVES = {"situation_ari": "situation ARI", "situation_nmi": "situation NMI", "requirement_recall": "requirement recall",
          "preference_recall": "preference recall", "preference_precision": "preference precision",
          "background_coverage": "background coverage", "text_recall": "text recall",
          "text_precision": "text precision"}
MISS_KINDS = {"missed": "not in the memory", "polarity": "remembered with the opposite polarity",
              "split": "its logs split over several groups", "merged": "its logs grouped with another situation's"}


def fidelity_figure(report: FidelityReport, selected: str | None = None) -> go.Figure:
    """Each fidelity figure over the sessions measured, the gold memory's 1.0 as a dashed line."""
    x = [s.sample_id for s in report.sessions]
    fig = go.Figure()
    for name, label in CURVES.items():
        ys = [getattr(s, name) for s in report.sessions]
        if all(v is None for v in ys):
            continue
        fig.add_scatter(x=x, y=ys, mode="lines+markers", name=label, connectgaps=False,
                        hovertemplate=f"{label}: %{{y:.3f}}<br>as of %{{x}}<extra></extra>")
    if x:
        fig.add_scatter(x=[x[0], x[-1]], y=[1.0, 1.0], mode="lines", name=f"gold ({ORACLE_LABEL})",
                        line={"dash": "dash", "color": "#111827"}, hoverinfo="skip")
    if selected in x:
        fig.add_vline(x=x.index(selected), line={"color": "#9ca3af", "width": 1})
    fig.update_layout(height=380, margin={"l": 10, "r": 10, "t": 40, "b": 10}, legend={"orientation": "h", "y": -0.25},
                      yaxis={"range": [-0.05, 1.05], "title": f"share (matches at cosine ≥ {report.threshold:g})"},
                      xaxis={"title": "memory as of session (after its dialogue)", "type": "category"},
                      title={"text": f"{report.method} against the gold memory", "font": {"size": 14}})
    return fig


def layer_counts_figure(gold: dict[str, MemoryItem], mine: dict[str, MemoryItem], method: str) -> go.Figure:
    """Items per layer: the method beside the gold memory, at one session."""
    g, m = Counter(i.layer for i in gold.values()), Counter(i.layer for i in mine.values())
    layers = list(dict.fromkeys([*g, *m]))
    fig = go.Figure()
    fig.add_bar(x=layers, y=[g.get(layer, 0) for layer in layers], name=f"gold ({ORACLE_LABEL})", marker_color="#111827")
    fig.add_bar(x=layers, y=[m.get(layer, 0) for layer in layers], name=method, marker_color="#2563eb")
    fig.update_layout(barmode="group", height=300, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      yaxis={"title": "items"}, legend={"orientation": "h", "y": 1.15})
    return fig


def _fmt(value: float | int | None) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def sessions_frame(report: FidelityReport) -> pd.DataFrame:
    """One row per session: every headline figure (– where it is not measurable)."""
    rows = [{"session": s.sample_id, "split": s.split, **{n: _fmt(getattr(s, n)) for n in HEADLINE},
             **{f"background_{a}": _fmt(v) for a, v in s.background.items()}} for s in report.sessions]
    return pd.DataFrame(rows)


def misses_frame(report: FidelityReport, layers: list[str] | None = None) -> pd.DataFrame:
    """The gold items the memory lost, worst first within each layer."""
    rows = [{"layer": m.layer, "what": MISS_KINDS.get(m.kind, m.kind), "gold": m.text,
             "polarity": m.polarity or "", "aspect": m.aspect or "", "best match": m.best_text,
             "cosine": m.best_score} for m in report.misses if layers is None or m.layer in layers]
    return pd.DataFrame(rows, columns=["layer", "what", "gold", "polarity", "aspect", "best match", "cosine"])


def definitions_markdown(report: FidelityReport) -> list[str]:
    """Lines "figure: definition (scope)" for the figures of this report, plus why others are not measured."""
    scope_of = {"situation": "situation", "requirement": "requirement", "preference": "preference",
                "background": "background", "text": "text"}
    lines = []
    for name in HEADLINE:
        layer = next((v for k, v in scope_of.items() if name.startswith(k)), "text")
        scope = report.scopes.get(layer, "")
        lines.append(f"**{name}** — {DEFINITIONS[name]}" + (f" Compared with: {scope}." if scope else ""))
    lines += [f"**{k}** not measured: {v}" for k, v in report.unavailable.items()]
    return lines
