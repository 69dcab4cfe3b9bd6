"""Pure builders behind the Users page: escaping, figures, gallery filters, log explorer."""

from datetime import date

from palset.loader import load_dataset
from tests.conftest import DEMO
from ui.charts import build_big_five_radar, build_timeline_figure
from ui.tables import GalleryFilter, LogFilter, filter_users, gallery_frame, log_frame
from ui.text import clip, first_sentence, md_escape
from ui.users.view import session_from_points


def test_md_escape_neutralises_markdown_and_html():
    raw = "<script>alert(1)</script> **bold** [x](http://e.vil) :red[hi] $x$"
    out = md_escape(raw)
    for token in ("<script>", "**bold**", "[x](", ":red[", "$x$"):
        assert token not in out
    assert out.replace("\\", "") == raw


def test_clip_and_first_sentence():
    assert clip("one two three four", 9) == "one two…"
    assert first_sentence("The user is a nurse. She works nights.") == "The user is a nurse."
    assert first_sentence("用户是一名护士。她上夜班。") == "用户是一名护士。"


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


def test_session_from_points():
    assert session_from_points([{"customdata": "1000_sample3"}]) == "1000_sample3"
    assert session_from_points([{"customdata": ["1000_sample4"]}]) == "1000_sample4"
    assert session_from_points([{"x": 1}]) is None


def test_gallery_filters():
    ds = load_dataset(DEMO)
    assert [u.uid for u in filter_users(ds, GalleryFilter(text="nurse leeds"))] == ["1000"]
    zh = filter_users(ds, GalleryFilter(languages=["zh"]))
    assert zh and all(u.language == "zh" for u in zh)
    neurotic = filter_users(ds, GalleryFilter(trait="Neuroticism", level="high"))
    assert neurotic and all(u.profile.personality.neuroticism == "high" for u in neurotic)
    frame = gallery_frame(filter_users(ds, GalleryFilter()))
    assert len(frame) == len(ds.users) and {"id", "name", "big_five", "logs"} <= set(frame.columns)


def test_log_explorer_filters_by_type_dates_text_and_session():
    user = load_dataset(DEMO).users["1001"]
    everything = log_frame(user)
    assert len(everything) == user.log_count
    only = log_frame(user, LogFilter(types=["Transaction Record"]))
    assert 0 < len(only) < len(everything) and set(only["type"]) == {"Transaction Record"}
    first = user.sessions[0]
    in_session = log_frame(user, LogFilter(session=first.sample_id))
    assert len(in_session) == len(first.logs)
    day = first.logs[0].timestamp.date()
    assert all(t.date() == day for t in log_frame(user, LogFilter(start=day, end=day))["time"])
    assert len(log_frame(user, LogFilter(text="zzzz-not-there"))) == 0
    assert log_frame(user, LogFilter(start=date(1999, 1, 1), end=date(1999, 1, 2))).empty
