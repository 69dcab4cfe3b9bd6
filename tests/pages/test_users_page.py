"""AppTest of the Users page: gallery, filters, user view, tabs, deep links, escaping."""

import json
import re

from palset.loader import load_dataset
from tests.conftest import DEMO, read, write
from tests.pages.apptest import all_markdown, open_page

UNESCAPED_TAG = re.compile(r"(?<!\\)<(script|img|b)\b")


def test_gallery_lists_every_demo_user_with_counts():
    at = open_page("users")
    assert at.title[0].value == "Users"
    text = all_markdown(at)
    ds = load_dataset(DEMO)
    for user in ds.users.values():
        assert user.uid in text
    assert "sessions (2 query)" in text
    assert len([b for b in at.button if (b.key or "").startswith("open_")]) == len(ds.users)


def test_gallery_search_filters_cards():
    at = open_page("users")
    at.text_input(key="gallery_search").input("photographer").run()
    opens = [b for b in at.button if (b.key or "").startswith("open_")]
    assert [b.key for b in opens] == ["open_1004"]


def test_open_button_shows_the_user_and_sets_the_url():
    at = open_page("users")
    at.button(key="open_1002").click().run()
    assert at.query_params["user"] == "1002"
    assert at.title[0].value == "Alexandra Kowalski"
    assert [t.label for t in at.tabs] == ["Profile", "Timeline", "Logs", "Sessions"]
    assert any("Occupation" in m.value for m in at.markdown)
    assert at.query_params["tab"] == "Profile"


def test_deep_link_to_a_session_opens_it_with_acts_and_candidates():
    at = open_page("users", user="1001", session="1001_sample3")
    assert at.selectbox(key="session_select").value == "1001_sample3"
    session = load_dataset(DEMO).users["1001"].session("1001_sample3")
    assert len(at.chat_message) == 2 * len(session.turns)
    text = all_markdown(at)
    assert "Topic Inquiry" in text and "Solution Feedback" in text
    assert len(re.findall(r"-badge\[S\d", text)) == sum(len(t.topic.candidate_solutions) for t in session.topics)
    assert ":green-badge[S" in text and ":red-badge[S" in text
    assert "Situation" in text


def test_deep_link_to_a_tab_and_an_unknown_user():
    at = open_page("users", user="1000", tab="Logs")
    assert at.session_state["user_tab"] == "Logs"
    assert at.dataframe and len(at.dataframe[0].value) == load_dataset(DEMO).users["1000"].log_count
    at = open_page("users", user="9999")
    assert "No user with id '9999'" in at.warning[0].value and at.title[0].value == "Users"


def test_switching_session_updates_the_url():
    at = open_page("users", user="1006", tab="Sessions")
    at.selectbox(key="session_select").select("1006_sample2").run()
    assert at.query_params["session"] == "1006_sample2"
    assert "考核排了第四" in all_markdown(at)


def test_text_from_data_is_escaped(small_release, monkeypatch):
    path = small_release / "input.json"
    data = read(path)
    data["0000"]["history"][0]["logs"][0]["content"] = "<script>alert('x')</script>"
    data["0000"]["history"][0]["dialogue"]["turn_1"]["user"]["content"] = "<img src=x onerror=alert(1)> **loud**"
    write(path, data)
    bg = read(small_release / "background" / "background.json")
    bg["0000"]["occupation"] = "<b>boss</b> [link](javascript:alert(1))"
    write(small_release / "background" / "background.json", bg)
    monkeypatch.setenv("PAL_DATASETS", f"evil={small_release}")
    at = open_page("users", dataset="evil", user="0000", session="0000_sample0")
    text = all_markdown(at)
    assert not UNESCAPED_TAG.search(text) and "**loud**" not in text and "\\<img" in text
    logs = at.dataframe[0].value
    assert "<script>alert('x')</script>" in set(logs["content"])  # a dataframe cell shows text verbatim
    at = open_page("users", dataset="evil", user="0000")
    assert not UNESCAPED_TAG.search(all_markdown(at)) and "\\<b\\>boss" in all_markdown(at)


def test_partial_release_shows_what_exists_and_says_what_is_missing(monkeypatch, tmp_path):
    from tests.conftest import PALSET, require_shared

    monkeypatch.setenv("PAL_DATASETS", f"palset-en={require_shared(PALSET / 'data_en')}")
    at = open_page("users", dataset="palset-en", user="0003", tab="Sessions")
    assert any("no input file" in i.value for i in at.info)
    assert any("Partial release" in w.value for w in at.sidebar.warning)
    at = open_page("users", dataset="palset-en", user="0003")
    assert any("accepts" in m.value for m in at.markdown)


def test_dataset_tour_file_is_valid():
    stops = json.loads((DEMO / "tour.json").read_text(encoding="utf-8"))
    ds = load_dataset(DEMO)
    from ui.tour import load_tour

    loaded, problem = load_tour(ds)
    assert problem is None and len(loaded) == len(stops)  # every stop validates and points somewhere
    for stop in stops:
        if stop.get("user"):
            assert stop["user"] in ds.users
        if stop.get("session"):
            assert ds.users[stop["user"]].session(stop["session"])
