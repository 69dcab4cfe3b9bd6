"""AppTest per role: the navigation lists exactly the role's pages, a forbidden page opened by URL renders
nothing of itself, a signed-out visitor sees only the sign-in form (leading back to the page asked for), identity
comes from the session cookie of each run and never from the Streamlit session's state."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from review.access import PAGES, ROLE_PAGES
from review.throttle import SignInThrottle
from tests.conftest import ROOT
from tests.pages.apptest import CookieJar, app_workspace
from ui.navigation import SPECS, build_pages, visible_pages

PASSWORD = "correct-horse"
# a phrase each page shows when it runs (its title), to prove a forbidden page rendered nothing of itself
TITLES = {"home": "PAL Studio", **{p: SPECS[p].title for p in PAGES if p != "home"}}


JAR = CookieJar()


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_AUTH", "accounts")
    monkeypatch.setattr(app_workspace(), "sign_in_throttle", SignInThrottle(base_s=60))
    JAR.install(monkeypatch)
    accounts = app_workspace().accounts
    for name, role in (("boss", "admin"), ("res", "researcher"), ("ann", "annotator")):
        accounts.add(name, role, PASSWORD)
    return accounts


def run_as(name: str | None, page: str | None, **params: str) -> AppTest:
    """Run ``page`` (None: the address "/") with ``name`` signed in (a fresh session cookie) or nobody."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if page:
        at.switch_page(f"pages/{page}.py")
    for key, value in params.items():
        at.query_params[key] = value
    JAR.sign_in(name)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def sign_in_form(at: AppTest) -> str:
    """The sign-in form's HTML ('' when the page shows none)."""
    return next((h.value for h in at.html if 'action="/auth/sign-in"' in h.value), "")


def texts(at: AppTest) -> str:
    parts = [t.value for t in at.title] + [m.value for m in at.markdown] + [c.value for c in at.caption]
    return "\n".join(parts + [e.value for e in at.error] + [i.value for i in at.info])


@pytest.mark.parametrize("role", list(ROLE_PAGES))
def test_navigation_holds_exactly_the_roles_pages(role):
    pages = build_pages(role)
    shown = [path for path, p in pages.items() if p._visibility == "visible"]
    assert shown == visible_pages(role) == list(ROLE_PAGES[role])
    assert [path for path, p in pages.items() if p._default] == ["home"]  # served at "/"; see landing_redirect
    assert not [p for p in build_pages(None).values() if p._visibility == "visible"]


@pytest.mark.parametrize(("name", "role"), [("boss", "admin"), ("res", "researcher"), ("ann", "annotator")])
def test_a_forbidden_page_by_url_renders_nothing_of_itself(lab, name, role):
    for page in PAGES:
        at = run_as(name, page)
        if page == "home" and page not in ROLE_PAGES[role]:  # "/" and "/home" lead to the role's first page
            assert [t.value for t in at.title] == [TITLES[ROLE_PAGES[role][0]]] and not at.error
            continue
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
    assert [t.value for t in at.title] == ["PAL Studio"] and 'name="pal_password"' in sign_in_form(at)
    assert not at.sidebar.selectbox and not at.tabs and not at.dataframe


def test_the_sign_in_form_leads_back_to_the_view_asked_for(lab):
    form = sign_in_form(run_as(None, "users", user="1001", tab="Timeline"))
    assert 'name="pal_next" value="/users?user=1001&amp;tab=Timeline"' in form
    assert 'name="pal_next" value="/"' in sign_in_form(run_as(None, None))


@pytest.mark.parametrize(("code", "message"), [
    ("failed", "Unknown name or wrong password."),
    ("wait-12", "Too many failed sign-ins for this name or from this address. Try again in 12 s."),
    ("expired", "The sign-in form had expired; sign in again."),
])
def test_the_sign_in_routes_answers_are_shown(lab, code, message):
    at = run_as(None, "review", signin=code)
    assert [e.value for e in at.error] == [message] and 'name="pal_next" value="/review"' in sign_in_form(at)


def test_without_the_sign_in_route_the_page_says_how_to_serve_the_app(lab, monkeypatch):
    from ui import web_auth

    monkeypatch.setattr(web_auth, "_mounted", False)  # streamlit run app.py, not serve.py
    at = run_as(None, "review")
    assert "make serve" in at.error[0].value and not sign_in_form(at)


def test_identity_comes_from_the_cookie_of_each_run_never_from_the_session_state(lab):
    """Audit finding 1: a password sign-in lived in the Streamlit session's state, so whoever reconnected with that
    session id (it appears in every upload URL) was that user. Now the same session without the cookie — what a
    reconnect from another browser brings — is signed out, and state crafted the old way signs nobody in."""
    at = run_as("boss", "settings")
    assert [t.value for t in at.title] == ["Settings"]
    JAR.cookie = None  # the same Streamlit session, reached by a connection without the cookie
    at.run()
    assert [t.value for t in at.title] == ["PAL Studio"] and sign_in_form(at)
    at.session_state["review_account"] = {"name": "boss"}  # what the old sign-in kept
    at.run()
    assert [t.value for t in at.title] == ["PAL Studio"] and not at.sidebar.button


def test_an_ended_session_or_changed_password_signs_out_on_the_next_run(lab):
    at = run_as("res", "users")
    assert at.sidebar.selectbox(key="dataset_choice")
    app_workspace().sessions.end_all("res")  # an admin ended res's sign-ins
    at.run()
    assert sign_in_form(at) and not at.sidebar.selectbox
    at = run_as("res", "users")
    lab.set_password("res", "a-new-password")
    at.run()
    assert sign_in_form(at)


def test_sign_out_ends_the_session_behind_the_cookie(lab):
    at = run_as("boss", "home")
    cookie = JAR.cookie
    at.sidebar.button(key="auth_logout").click().run()
    assert app_workspace().sessions.resolve(cookie) is None and sign_in_form(at)
    assert [e.action for e in app_workspace().audit.entries()][0] == "auth.sign_out"


def test_an_annotator_at_the_root_address_lands_on_review(lab):
    """Audit finding 25: an annotator signing in at "/" landed on "Home is not available"."""
    at = run_as("ann", None)
    assert [t.value for t in at.title] == ["Review"] and not at.error


def test_admins_see_and_end_sign_in_sessions_in_the_accounts_tab(lab):
    app_workspace().sessions.issue("ann", client="198.51.100.4", user_agent="Firefox")
    at = run_as("boss", "review")
    accounts_tab = at.tabs[3]
    frames = [d.value for d in accounts_tab.dataframe]
    assert set(frames[0]["name"]) == {"ann", "boss", "res"} and "198.51.100.4" in set(frames[1]["address"])
    at.selectbox(key="review_accounts_end_who").select("ann").run()
    at.button(key="review_accounts_end").click().run()
    assert app_workspace().sessions.list("ann") == [] and "Ended 1 sign-in session(s) of ann" in at.success[0].value
    entry = app_workspace().audit.entries()[0]
    assert (entry.actor, entry.action, entry.target) == ("boss", "auth.sessions_ended", "ann")


def test_with_no_account_yet_the_app_shows_only_how_to_create_the_first_admin(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_AUTH", "accounts")
    at = run_as(None, "settings")
    assert "pal users add NAME --role admin" in at.info[0].value and not at.html


def test_a_removed_account_loses_access_on_the_next_run(lab):
    at = run_as("res", "users")
    assert at.sidebar.selectbox(key="dataset_choice")
    lab.remove("res")
    at.run()
    assert sign_in_form(at) and not at.sidebar.selectbox


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
