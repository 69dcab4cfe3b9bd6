from tests.pages.apptest import open_page


def test_home_explains_the_app_and_links_the_tour():
    at = open_page("home")
    assert at.title[0].value == "PAL Studio"
    assert any("PAL-Set" in m.value for m in at.markdown)
    assert at.metric[0].value == "8"
    assert any("A short tour" in s.value for s in at.subheader)


def test_sidebar_shows_the_active_dataset_and_switches(monkeypatch):
    monkeypatch.setenv("PAL_DATA_ROOTS", "/definitely")  # inside the roots, so the folder check is reached
    at = open_page("home")
    assert at.sidebar.selectbox(key="dataset_choice").value == "demo"
    at.sidebar.text_input(key="dataset_path_input").input("/definitely/not/here")
    at.sidebar.button[0].click().run()
    assert any("is not a folder" in e.value for e in at.sidebar.error)


def test_a_link_to_another_dataset_in_the_same_session_is_followed_not_undone(tmp_path, monkeypatch, small_release):
    """The picker remembers its last value; a URL naming another dataset (an in-app link) must win over it."""
    monkeypatch.setenv("PAL_DATASETS", f"other={small_release}")
    at = open_page("home")
    assert at.sidebar.selectbox(key="dataset_choice").value == "demo"
    at.query_params["dataset"] = "other"
    at.run()
    assert at.sidebar.selectbox(key="dataset_choice").value == "other"
    assert at.query_params.get("dataset") in ("other", ["other"])
    assert at.metric[0].value == "2"  # the home page counts the other dataset's users


def test_open_a_folder_refuses_anything_outside_the_data_roots(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.delenv("PAL_DATA_ROOTS", raising=False)
    for outside in ("/", "~", "/etc", "data/../.."):
        at = open_page("home")
        at.sidebar.text_input(key="dataset_path_input").input(outside)
        at.sidebar.button[0].click().run()
        assert any("outside the folders this server may use" in e.value for e in at.sidebar.error), outside
        assert at.sidebar.selectbox(key="dataset_choice").options == ["demo"]


def test_a_deeply_nested_or_huge_file_is_a_problem_and_the_app_stays_up(small_release, monkeypatch):
    import json

    path = small_release / "input.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(data).replace('"history":', '"deep": ' + "[" * 50_000 + "]" * 50_000 + ', "history":', 1),
                    encoding="utf-8")
    monkeypatch.setenv("PAL_DATASETS", f"deep={small_release}")
    at = open_page("home", dataset="deep")  # open_page asserts no exception
    problems = "\n".join(c.value for c in at.sidebar.get("code"))
    assert "input.json: (top level): nested too deeply to read" in problems
    for page in ("users", "memory", "simulate"):
        open_page(page, dataset="deep")
