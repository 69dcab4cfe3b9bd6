"""Plotly figures of a user: Big Five radar and the interactive timeline.

Figures are built from records only (no Streamlit calls), so they are unit-tested directly.
Session markers carry their ``sample_id`` in ``customdata``: selecting one opens that session.
"""

from __future__ import annotations

import html
from collections import Counter
from datetime import datetime, timedelta

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from palset.dataset import User
from palset.models import BigFive
from palset.vocab import ASPECTS, BIG_FIVE, LogType
from ui.text import clip

# badge colours of the dialogue acts and of a user's feedback (Users and Simulate pages)
ACT_COLOURS = {
    "Topic Inquiry": "blue", "Requirement Confirmation": "violet", "Solution Discussion": "orange",
    "Solution Feedback": "red", "Requirement Prediction": "green", "Solution Proposal": "primary",
    "Feedback Response": "gray",
}
FEEDBACK_COLOURS = {"pos": "green", "neg": "red", "neu": "gray"}

LEVEL_VALUE = {"low": 1, "medium": 2, "high": 3}
ASPECT_COLOURS = {"work": "#4C78A8", "health": "#54A24B", "family": "#E45756", "leisure": "#F58518"}
SESSION_COLOURS = {"history": "#6C757D", "query": "#B279A2"}


def build_big_five_radar(personality: BigFive, name: str = "") -> go.Figure:
    """Radar of the five traits on a low/medium/high scale."""
    levels = personality.as_dict()
    values = [LEVEL_VALUE[levels[t]] for t in BIG_FIVE]
    fig = go.Figure(
        go.Scatterpolar(
            r=values + values[:1],
            theta=list(BIG_FIVE) + [BIG_FIVE[0]],
            fill="toself",
            name=_h(name) if name else "Big Five",  # plotly reads a little HTML in names: data is escaped
            text=[levels[t] for t in BIG_FIVE] + [levels[BIG_FIVE[0]]],
            hovertemplate="%{theta}: %{text}<extra></extra>",
        )
    )
    fig.update_layout(
        polar={"radialaxis": {"range": [0, 3], "tickvals": [1, 2, 3], "ticktext": ["low", "medium", "high"]}},
        showlegend=False,
        margin={"l": 40, "r": 40, "t": 30, "b": 30},
        height=320,
    )
    return fig


def _h(text: str) -> str:
    """Plotly hover labels understand a little HTML: escape data text."""
    return html.escape(text)


def _situation_aspect(req_ids: list[str]) -> str:
    aspect = req_ids[0].split("-", 1)[0] if req_ids else "work"
    return aspect if aspect in ASPECTS else "work"


def build_timeline_figure(user: User) -> go.Figure:
    """Months, situations coloured by aspect, sessions as markers, and log density by day and type."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.45, 0.55], vertical_spacing=0.04)
    _add_months(fig, user)
    _add_situations(fig, user)
    _add_sessions(fig, user)
    _add_log_density(fig, user)
    fig.update_yaxes(
        row=1, col=1, tickvals=[0, 1, 2], ticktext=["Sessions", "Situations", "Months"], range=[-0.6, 2.6], fixedrange=True
    )
    fig.update_yaxes(row=2, col=1, fixedrange=True)
    fig.update_layout(
        height=460,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.08, "x": 0},
        clickmode="event+select",
        dragmode="pan",
        hovermode="closest",
    )
    return fig


def _add_months(fig: go.Figure, user: User) -> None:
    for month, text in user.timeline.items():
        start = datetime.strptime(month, "%Y-%m")
        end = (start + timedelta(days=32)).replace(day=1)
        fig.add_trace(
            go.Scatter(
                x=[start, end], y=[2, 2], mode="lines", line={"width": 14, "color": "#D0D7DE"},
                hovertext=_h(clip(text, 220)), hoverinfo="text", showlegend=False, name=month,
            ),
            row=1, col=1,
        )
        fig.add_annotation(x=start + (end - start) / 2, y=2, text=start.strftime("%b %Y"), showarrow=False,
                           font={"size": 10}, row=1, col=1)


def _add_situations(fig: go.Figure, user: User) -> None:
    shown: set[str] = set()
    for _end_date, sit in user.situations.items():
        aspect = _situation_aspect(sit.requirement_ids)
        phrases = _h(", ".join(user.requirement_phrase(r) or r for r in sit.requirement_ids))
        fig.add_trace(
            go.Scatter(
                x=[sit.start_timestamp, sit.end_timestamp], y=[1, 1], mode="lines",
                line={"width": 12, "color": ASPECT_COLOURS[aspect]},
                name=aspect, legendgroup=aspect, showlegend=aspect not in shown,
                hovertext=f"{sit.start_timestamp:%d %b} – {sit.end_timestamp:%d %b}<br>{phrases}<br>{_h(clip(sit.situation, 160))}",
                hoverinfo="text",
            ),
            row=1, col=1,
        )
        shown.add(aspect)


def _add_sessions(fig: go.Figure, user: User) -> None:
    for split in ("history", "query"):
        sessions = [s for s in user.sessions if s.split == split]
        if not sessions:
            continue
        fig.add_trace(
            go.Scatter(
                x=[s.dialogue_timestamp for s in sessions],
                y=[0] * len(sessions),
                mode="markers",
                marker={"size": 14, "color": SESSION_COLOURS[split], "symbol": "diamond"},
                name=f"{split} sessions",
                customdata=[s.sample_id for s in sessions],
                text=[
                    f"{s.sample_id} ({split})<br>{len(s.logs)} logs, {len(s.turns)} turns<br>"
                    + "<br>".join(_h(clip(t.topic.user_query, 70)) for t in s.topics)
                    for s in sessions
                ],
                hovertemplate="%{text}<extra>click to open</extra>",
            ),
            row=1, col=1,
        )


def _add_log_density(fig: go.Figure, user: User) -> None:
    counts: Counter[tuple[str, str]] = Counter()
    days: set[str] = set()
    for s in user.sessions:
        for lg in s.logs:
            day = lg.timestamp.strftime("%Y-%m-%d")
            days.add(day)
            counts[(lg.type.value if lg.type else "unknown", day)] += 1
    if not days:
        return
    first = datetime.strptime(min(days), "%Y-%m-%d")
    last = datetime.strptime(max(days), "%Y-%m-%d")
    axis = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    types = [t.value for t in LogType]
    z = [[counts.get((t, d.strftime("%Y-%m-%d")), 0) for d in axis] for t in types]
    fig.add_trace(
        go.Heatmap(
            x=axis, y=types, z=z, colorscale="Blues", showscale=False, xgap=1, ygap=1,
            hovertemplate="%{x|%d %b %Y} · %{y}: %{z} logs<extra></extra>", name="logs per day",
        ),
        row=2, col=1,
    )


def build_estimates_figure(series: dict[str, dict[str, tuple[float | None, float | None, float | None]]],
                           categories: dict[str, str], *, percent: bool = True, title: str = "") -> go.Figure:
    """Grouped bars with 95% error bars: one colour per series (a method), one group per category (a figure or
    layer, keyed by name with its readable label); ``(value, low, high)`` per cell, a missing value left out
    (never drawn as 0) and a missing interval drawn without whiskers."""
    fig = go.Figure()
    labels = list(categories.values())
    for name, cells in series.items():
        xs, ys, plus, minus, texts = [], [], [], [], []
        for key, label in categories.items():
            value, low, high = cells.get(key, (None, None, None))
            if value is None:
                continue
            xs.append(label)
            ys.append(value)
            plus.append(0.0 if high is None else max(0.0, high - value))
            minus.append(0.0 if low is None else max(0.0, value - low))
            texts.append(f"{value:.0%}" if percent else f"{value:.2f}")
        fig.add_bar(x=xs, y=ys, name=_h(name), text=texts, textposition="outside", cliponaxis=False,
                    error_y={"type": "data", "symmetric": False, "array": plus, "arrayminus": minus,
                             "thickness": 1.5, "width": 4},
                    hovertemplate=f"{_h(name)}<br>%{{x}}: %{{y:{'.0%' if percent else '.2f'}}}<extra></extra>")
    fig.update_layout(barmode="group", height=380, margin={"l": 10, "r": 10, "t": 40 if title else 20, "b": 10},
                      legend={"orientation": "h", "y": -0.2}, title={"text": _h(title), "font": {"size": 14}},
                      yaxis={"tickformat": ".0%" if percent else None, "rangemode": "tozero"},
                      xaxis={"categoryorder": "array", "categoryarray": labels})
    return fig
