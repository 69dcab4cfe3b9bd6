"""Plotly figures of a user (ui.charts): records in, figures out."""

from palset.loader import load_dataset
from tests.conftest import DEMO
from ui.charts import build_big_five_radar, build_timeline_figure


def test_radar_and_timeline_figures_carry_the_data():
    ds = load_dataset(DEMO)
    user = ds.users["1000"]
    radar = build_big_five_radar(user.profile.personality)
    assert list(radar.data[0].r[:5]) == [{"low": 1, "medium": 2, "high": 3}[v] for v in user.profile.personality.as_dict().values()]
    fig = build_timeline_figure(user)
    markers = [t for t in fig.data if t.customdata is not None]
    ids = [i for t in markers for i in t.customdata]
    assert ids == [s.sample_id for s in user.history] + [s.sample_id for s in user.query]
    heat = [t for t in fig.data if t.type == "heatmap"][0]
    assert sum(map(sum, heat.z)) == user.log_count
    situation_traces = [t for t in fig.data if t.type == "scatter" and t.mode == "lines" and t.y[0] == 1]
    assert len(situation_traces) == len(user.situations)


def test_timeline_hover_text_is_html_escaped(small_release):
    ds = load_dataset(small_release)
    user = ds.users["0000"]
    sit = next(iter(user.situations.values()))
    sit.situation = "<img src=x onerror=alert(1)>"
    fig = build_timeline_figure(user)
    hovers = " ".join(str(t.hovertext) for t in fig.data if t.hovertext)
    assert "<img" not in hovers and "&lt;img" in hovers


def test_a_profile_name_reaches_plotly_as_text(demo_dataset):
    """Plotly reads a little HTML in trace names (shown on hover): a hostile name is escaped, never markup."""
    user = demo_dataset.users["1000"]
    radar = build_big_five_radar(user.profile.personality, '<img src="http://127.0.0.1:9/x.png"><b>Eve</b>')
    assert "<" not in radar.data[0].name and "&lt;img" in radar.data[0].name
