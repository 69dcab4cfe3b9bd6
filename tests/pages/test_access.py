"""AppTest per role: the navigation lists exactly the role's pages, a forbidden page opened by URL renders
nothing of itself, a signed-out visitor sees only the sign-in, failed sign-ins back off, annotators are blinded."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from review.access import PAGES, ROLE_PAGES
from review.throttle import SignInThrottle
from tests.conftest import ROOT
from tests.pages.apptest import app_workspace
from ui import access
from ui.navigation import SPECS, build_pages, visible_pages

PASSWORD = "correct-horse"
# a phrase each page shows when it runs (its title), to prove a forbidden page rendered nothing of itself
TITLES = {"home": "PAL Studio", **{p: SPECS[p].title for p in PAGES if p != "home"}}


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_AUTH", "accounts")
    monkeypatch.setattr(app_workspace(), "sign_in_throttle", SignInThrottle(base_s=60))
    accounts = app_workspace().accounts
    for name, role in (("boss", "admin"), ("res", "researcher"), ("ann", "annotator")):
        accounts.add(name, role, PASSWORD)
    return accounts


def run_as(name: str | None, page: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(f"pages/{page}.py")
    for key, value in params.items():
        at.query_params[key] = value
    if name:
        at.session_state[access.ACCOUNT_KEY] = {"name": name}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = [t.value for t in at.title] + [m.value for m in at.markdown] + [c.value for c in at.caption]
    return "\n".join(parts + [e.value for e in at.error] + [i.value for i in at.info])


@pytest.mark.parametrize("role", list(ROLE_PAGES))
def test_navigation_holds_exactly_the_roles_pages(role):
    pages = build_pages(role)
    shown = [path for path, p in pages.items() if p._visibility == "visible"]
    assert shown == visible_pages(role) == list(ROLE_PAGES[role])
    assert [path for path, p in pages.items() if p._default] == [ROLE_PAGES[role][0]]
    assert not [p for p in build_pages(None).values() if p._visibility == "visible"]


@pytest.mark.parametrize(("name", "role"), [("boss", "admin"), ("res", "researcher"), ("ann", "annotator")])
def test_a_forbidden_page_by_url_renders_nothing_of_itself(lab, name, role):
    for page in PAGES:
        at = run_as(name, page)
        if page in ROLE_PAGES[role]:
            if page in ("settings", "audit", "review", "home"):  # cheap to render fully here
                assert TITLES[page] in [t.value for t in at.title], page
            continue
        assert [e.value for e in at.error] == [f"The {SPECS[page].title} page is not available to your role ({role})."]
        assert not at.title and not at.markdown and not at.sidebar.selectbox, page
        assert [b.label for b in at.sidebar.button] == ["Sign out"]


@pytest.mark.parametrize("page", ["evaluate", "settings", "memory", "review", "audit"])
def test_signed_out_visitors_see_only_the_sign_in(lab, page):
    at = run_as(None, page)
    assert [t.value for t in at.title] == ["PAL Studio"] and at.text_input(key="review_login_name")
    assert not at.sidebar.selectbox and not at.tabs and not at.dataframe


def test_with_no_account_yet_the_app_shows_only_how_to_create_the_first_admin(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_AUTH", "accounts")
    at = run_as(None, "settings")
    assert "pal users add NAME --role admin" in at.info[0].value and not at.text_input


def test_a_removed_account_loses_access_on_the_next_run(lab):
    at = run_as("res", "users")
    assert at.sidebar.selectbox(key="dataset_choice")
    lab.remove("res")
    at.run()
    assert at.text_input(key="review_login_name") and not at.sidebar.selectbox


def test_repeated_failures_back_off_with_a_message_and_then_sign_in_works(lab):
    at = run_as(None, "review")
    for _ in range(app_workspace().sign_in_throttle.free):
        at.text_input(key="review_login_name").input("ann")
        at.text_input(key="review_login_password").input("wrong-password")
        at.button(key="review_login_submit").click().run()
        assert at.error[0].value == "Unknown name or wrong password."
    at.text_input(key="review_login_password").input("wrong-again")
    at.button(key="review_login_submit").click().run()
    at.text_input(key="review_login_password").input(PASSWORD)
    at.button(key="review_login_submit").click().run()
    assert "Too many failed sign-ins" in at.error[0].value and not at.tabs  # even the right password waits
    app_workspace().sign_in_throttle._failures.clear()  # the wait is over
    at.button(key="review_login_submit").click().run()
    assert not at.error and "Reviewing as **ann**" in texts(at)
    at2 = run_as(None, "review")  # an unknown name backs off exactly alike
    for _ in range(app_workspace().sign_in_throttle.free + 2):
        at2.text_input(key="review_login_name").input("ghost")
        at2.text_input(key="review_login_password").input("wrong-password")
        at2.button(key="review_login_submit").click().run()
    assert "Too many failed sign-ins" in at2.error[0].value


def test_local_mode_needs_no_sign_in_and_is_the_admin(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_AUTH", "local")
    assert [t.value for t in run_as(None, "settings").title] == ["Settings"]
    monkeypatch.setenv("PAL_AUTH", "open-to-all")
    at = run_as(None, "home")
    assert "PAL_AUTH='open-to-all'" in at.error[0].value and not at.title


def test_researchers_manage_batches_but_only_admins_see_accounts(lab):
    assert [t.label for t in run_as("res", "review").tabs] == ["My assignments", "Batches", "New batch"]
    assert [t.label for t in run_as("boss", "review").tabs] == ["My assignments", "Batches", "New batch", "Accounts"]
    assert not run_as("ann", "review").tabs
    at = run_as("res", "users")
    assert at.sidebar.text_input(key="dataset_path_input")  # researchers open folders (inside the roots)
    assert not run_as("ann", "review").sidebar.text_input  # annotators pick a dataset only
