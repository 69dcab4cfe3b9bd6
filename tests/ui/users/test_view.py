"""The Users page's pure helpers (ui.users.view)."""

from ui.users.view import session_from_points


def test_session_from_points():
    assert session_from_points([{"customdata": "1000_sample3"}]) == "1000_sample3"
    assert session_from_points([{"customdata": ["1000_sample4"]}]) == "1000_sample4"
    assert session_from_points([{"x": 1}]) is None
