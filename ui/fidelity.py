"""Figures and tables of memory fidelity (pure: reports and items in, plotly figures and frames out).

Every figure names the threshold it was measured at; the gold memory is drawn as the oracle upper bound (1.0
by construction), the reference memories (:mod:`evaluation.fidelity.references`) sit above every method on the
leaderboards, and a figure that cannot be measured reads "n/a" with its reason — never 0."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import plotly.graph_objects as go

from evaluation.fidelity import DEFINITIONS, HEADLINE
from evaluation.fidelity.board import NA, cell, na_reason, not_measured
from evaluation.fidelity.references import REFERENCES
from evaluation.fidelity.types import LOWER_IS_BETTER, FidelityReport
from evaluation.takeaway_words import Language, cell_text, estimate_of, figure_label, method_label, reference_label
from evaluation.takeaways import measurement_key, primary_measurement
from memory.methods import ORACLE_LABEL, display_name
from memory.types import MemoryItem

CURVES = {"situation_within": "situation κ (within sessions)", "requirement_recall": "requirement recall",
          "requirement_f1": "requirement F1", "preference_f1": "preference F1", "background_f1": "background F1",
          "text_precision": "text precision", "text_f1": "text F1"}
MISS_KINDS = {"missed": "not in the memory", "polarity": "remembered with the opposite polarity",
              "split": "its logs split over several groups", "merged": "its logs grouped with another situation's"}
REFERENCE_NOTE = ("A method's figure means something only above the reference rows: the empty memory, one group per "
                  "session, the verbatim full history, another user's gold memory and generic statements the same for "
                  f"every user, measured by the same code (gold against itself is the ceiling, the {ORACLE_LABEL}). "
                  "'match precision' is how often an embedding match at τ is the same need rather than another need of "
                  "the same user and aspect; below 0.9 the judge matcher is the default reading, once it reaches 0.9 "
                  "itself on the same pairs (pal memory fidelity-threshold --judge; the bundled judge does not).")


def row_label(method: str) -> str:
    """A leaderboard row's name: the reference's description, or the method (oracles say so)."""
    return f"{method} ({REFERENCES[method].label})" if method in REFERENCES else display_name(method)


def fidelity_figure(report: FidelityReport, selected: str | None = None) -> go.Figure:
    """Each fidelity figure over the sessions measured, the gold memory's 1.0 as a dashed line, the headline
    session (the last history session) marked and the query sessions shaded."""
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
    queries = [i for i, s in enumerate(report.sessions) if s.split == "query"]
    if queries:
        fig.add_vrect(x0=queries[0] - 0.5, x1=queries[-1] + 0.5, fillcolor="#f3f4f6", line_width=0, layer="below",
                      annotation_text="query sessions", annotation_position="top left")
    if (head := report.headline) is not None:
        fig.add_vline(x=head.position, line={"color": "#2563eb", "width": 1, "dash": "dot"})
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


def fmt(value: float | int | None) -> str:
    """A figure in a table: three decimals, the integer, or "n/a"."""
    return NA if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def sessions_frame(report: FidelityReport) -> pd.DataFrame:
    """One row per session: every headline figure ("n/a" where it is not measurable), the headline marked."""
    head = report.headline
    rows = [{"session": s.sample_id, "split": s.split, "headline": "◀" if head and s.position == head.position else "",
             **{n: fmt(getattr(s, n)) for n in HEADLINE},
             **{f"background_{a}": fmt(v) for a, v in s.background.items()}} for s in report.sessions]
    return pd.DataFrame(rows)


def misses_frame(report: FidelityReport, layers: list[str] | None = None) -> pd.DataFrame:
    """The gold items the memory lost, worst first within each layer."""
    rows = [{"layer": m.layer, "what": MISS_KINDS.get(m.kind, m.kind), "gold": m.text,
             "polarity": m.polarity or "", "aspect": m.aspect or "", "best match": m.best_text,
             "cosine": m.best_score} for m in report.misses if layers is None or m.layer in layers]
    return pd.DataFrame(rows, columns=["layer", "what", "gold", "polarity", "aspect", "best match", "cosine"])


def compare_frame(report: FidelityReport, references: list[FidelityReport], figures: tuple[str, ...]) -> pd.DataFrame:
    """The method's headline figures under the reference memories' (one user), "n/a" where not measured."""
    rows = []
    for r in [*sorted(references, key=lambda x: list(REFERENCES).index(x.method)), report]:
        head = r.headline
        rows.append({"memory": row_label(r.method), **{f: fmt(getattr(head, f)) if head else NA for f in figures}})
    return pd.DataFrame(rows, columns=["memory", *figures])


def board_frame(rows: list[dict]) -> pd.DataFrame:
    """One row per (method or reference, embedder, τ, version): each headline figure as "mean [CI low, CI high]"
    over users, "n/a" where no user has it — the reasons in "not measured", older definitions marked stale."""
    out = [{"row": row_label(r["method"]), "kind": r["kind"], "stale": r["stale"] or "", "embedder": r["embedder"],
            "τ": r["threshold"], "τ ROC AUC": NA if r.get("threshold_auc") is None else f"{r['threshold_auc']:.3f}",
            "match precision": NA if r.get("match_precision") is None else f"{r['match_precision']:.3f}",
            "default matcher": r.get("default_matcher") or "embedding",
            "users": len(r["users"]), "as of": ", ".join(r["as_of"][:2]) + ("…" if len(r["as_of"]) > 2 else ""),
            **{name: cell(r[name]) for name in HEADLINE},
            "not measured": "; ".join(f"{k}: {v}" for k, v in r["not_measured"].items())} for r in rows]
    return pd.DataFrame(out, columns=["row", "kind", "stale", "embedder", "τ", "τ ROC AUC", "match precision",
                                      "default matcher", "users", "as of",
                                      *HEADLINE, "not measured"])


def definitions_markdown(report: FidelityReport) -> list[str]:
    """Lines "figure: definition (scope)" for the figures of this report, plus why others are not measured."""
    lines = [f"τ = {report.threshold:g} ({report.embedder}): {report.threshold_source or 'set by hand'}"]
    if report.default_matcher == "judge":
        lines.append(f"Default matcher: the judge — {report.embedder} cannot reach a match precision of 0.9 against "
                     "hard negatives, so the embedding figures below are matches of topic (read the judge variant).")
    for name in HEADLINE:
        layer = name.split("_", 1)[0]
        scope = report.scopes.get(layer, "")
        better = " Lower is better." if name in LOWER_IS_BETTER else ""
        lines.append(f"**{name}** — {DEFINITIONS[name]}{better}" + (f" Compared with: {scope}." if scope else ""))
    lines += [f"**{k}** n/a: {v}" for k, v in not_measured(report).items()]
    return lines


def figure_help(report: FidelityReport, name: str) -> str:
    """The help text of one figure: its definition, and why it is n/a when it is."""
    head = report.headline
    value = getattr(head, name) if head is not None else None
    return DEFINITIONS[name] + (f" n/a: {na_reason(report, name)}" if value is None else "")


def export_json(report: FidelityReport, references: list[FidelityReport]) -> str:
    """A report for download: the report, the figures it cannot measure and why, and the reference memories'
    reports of the same user measured alike."""
    return json.dumps({"report": report.model_dump(mode="json"), "not_measured": not_measured(report),
                       "references": [r.model_dump(mode="json") for r in references]}, ensure_ascii=False, indent=1)


FIDELITY_BASELINE = "rag-turn"  # the method the Fidelity tab of the gold memory measures first (and the tour warms)
CHART_LAYERS = ("requirement_recall", "preference_recall", "background_coverage", "text_recall")
BOARD_META = ("users", "embedder", "τ", "τ ROC AUC", "match precision", "default matcher", "definition", "as of",
              "not measured")


def readable_board(rows: list[dict], language: Language = "en", *, references: bool = False,
                   first: str | None = None) -> pd.DataFrame:
    """The board as people read it: the method (or the reference, with its meaning), then every figure under its
    readable name with the 95% interval beside it (``first`` leading), then the measurement's metadata."""
    figures = [first] if first in HEADLINE else []
    figures += [n for n in HEADLINE if n not in figures]
    primary = primary_measurement(rows)
    several = len({measurement_key(r) for r in rows}) > 1
    out = []
    for r in sorted(rows, key=lambda r: measurement_key(r) != primary):  # the headlines' measurement first
        if (r["kind"] == "reference") != references:
            continue
        name = reference_label(r["method"], language) if references else method_label(r["method"])
        if several:  # the same method measured twice: say which measurement each row is
            name += f" · {r['embedder']} τ {r['threshold']:g}"
        row: dict = {"reference" if references else "method": name}
        if references:
            row["meaning"] = r.get("expect", "")
        row.update({figure_label(n, language): cell_text(n, estimate_of(r[n])) for n in figures})
        row.update({"users": len(r["users"]), "embedder": r["embedder"], "τ": f"{r['threshold']:g}",
                    "τ ROC AUC": NA if r.get("threshold_auc") is None else f"{r['threshold_auc']:.3f}",
                    "match precision": NA if r.get("match_precision") is None else f"{r['match_precision']:.3f}",
                    "default matcher": r.get("default_matcher") or "embedding",
                    "definition": f"v{r['metric_version']}" + (" (stale)" if r["stale"] else ""),
                    "as of": ", ".join(r["as_of"][:2]) + ("…" if len(r["as_of"]) > 2 else ""),
                    "not measured": "; ".join(f"{figure_label(k, language)}: {v}"
                                              for k, v in r["not_measured"].items())})
        out.append(row)
    return pd.DataFrame(out)


def layer_series(rows: list[dict], key: tuple[str, float, str] | None,
                 language: Language = "en") -> tuple[dict[str, dict[str, tuple]], dict[str, str]]:
    """(method → layer → (value, low, high), layer → readable name) of the methods of one measurement, for the
    method × layer chart above the board."""
    series: dict[str, dict[str, tuple]] = {}
    for r in rows:
        if r["kind"] != "method" or measurement_key(r) != key:
            continue
        cells = {}
        for n in CHART_LAYERS:
            e = estimate_of(r[n])
            if e.value is not None:
                b = e.bounds() or (None, None)
                cells[n] = (e.value, b[0], b[1])
        series[method_label(r["method"])] = cells
    return series, {n: figure_label(n, language) for n in CHART_LAYERS}
