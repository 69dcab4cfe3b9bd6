"""Gallery filters and the log explorer (ui.tables)."""

from datetime import date

from palset.loader import load_dataset
from tests.conftest import DEMO
from ui.tables import GalleryFilter, LogFilter, filter_users, gallery_frame, log_frame


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
