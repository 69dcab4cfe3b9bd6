"""The sign-in route: the cookie it sets, where it sends the browser, and what it refuses (another origin, no XSRF
token, an open redirect, a role's forbidden page, too many failures, an oversized form)."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

from review.throttle import SignInThrottle
from testkit.workspace import make_workspace
from ui import web_auth
from ui.web_auth import Attempt, landing, page_token, safe_next, sign_in

PASSWORD = "correct-horse"
HOST = "pal.lab.example"
XSRF = generate_xsrf_token_string()


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_AUTH", "accounts")
    monkeypatch.delenv("PAL_TRUST_PROXY", raising=False)
    workspace = make_workspace(tmp_path / "pal")
    workspace.accounts.add("boss", "admin", PASSWORD)
    workspace.accounts.add("ann", "annotator", PASSWORD)
    return workspace


def attempt(name="boss", password=PASSWORD, next_path="/users?user=1000", **kw) -> Attempt:
    form = {"pal_name": name, "pal_password": password, "pal_next": next_path, "pal_xsrf": kw.pop("xsrf", XSRF)}
    base = dict(form=form, peer="127.0.0.1", scheme="http", host=HOST, origin=f"https://{HOST}", referer=None,
                forwarded_for=None, forwarded_proto=None, user_agent="test", xsrf_cookie=XSRF)
    return Attempt(**{**base, **kw})


def test_a_right_password_opens_the_deep_link_with_a_session_cookie(ws):
    out = sign_in(ws, attempt(), xsrf_on=True)
    assert out.location == "/users?user=1000" and out.cookie and out.status == 303
    assert ws.sessions.resolve(out.cookie, page=page_token(XSRF), origin=f"https://{HOST}").name == "boss"
    assert [e.action for e in ws.audit.entries()] == ["auth.sign_in"]


def test_the_session_counts_only_with_the_page_token_and_origin_it_signed_in_with(ws):
    """A cookie replayed alone, with another page's token or from another origin (another port) signs nobody in, and
    the owner's page, presenting both, stays signed in."""
    cookie = sign_in(ws, attempt(), xsrf_on=True).cookie
    other_token = page_token(generate_xsrf_token_string())
    assert ws.sessions.resolve(cookie) is None
    assert ws.sessions.resolve(cookie, page=other_token, origin=f"https://{HOST}") is None
    assert ws.sessions.resolve(cookie, page=page_token(XSRF), origin=f"https://{HOST}:8793") is None
    assert ws.sessions.resolve(cookie, page=page_token(XSRF), origin=f"https://{HOST.upper()}/").name == "boss"


def test_a_failed_sign_in_is_audited_with_the_name_tried_and_the_address(ws):
    sign_in(ws, attempt(name="ghost", password="wrong-password", peer="192.0.2.7"), xsrf_on=True)
    [entry] = ws.audit.entries(action="auth.sign_in_failed")
    assert entry.target == "ghost" and entry.detail["client"] == "192.0.2.7" and entry.actor == "anonymous"
    assert PASSWORD not in str(entry.detail) and "wrong-password" not in str(entry.detail)


def test_a_burst_of_parallel_guesses_counts_every_guess(ws):
    """The attempt is counted before the password is checked: of 24 guesses sent at once, only the free ones are
    checked, and the right password after them waits."""
    from concurrent.futures import ThreadPoolExecutor

    ws.sign_in_throttle = SignInThrottle(base_s=60)
    with ThreadPoolExecutor(24) as pool:
        outs = list(pool.map(lambda i: sign_in(ws, attempt(password=f"wrong-{i}"), xsrf_on=True), range(24)))
    checked = [o for o in outs if o.location.endswith("signin=failed")]
    assert len(checked) == ws.sign_in_throttle.free
    assert all("signin=wait-" in o.location for o in outs if o not in checked)
    assert sign_in(ws, attempt(), xsrf_on=True).cookie is None
    assert len(ws.audit.entries(action="auth.sign_in_failed")) == ws.sign_in_throttle.free


def test_a_wrong_password_or_unknown_name_answers_alike(ws):
    a = sign_in(ws, attempt(password="wrong-password"), xsrf_on=True)
    b = sign_in(ws, attempt(name="ghost", password="wrong-password"), xsrf_on=True)
    assert a.location == b.location == "/users?user=1000&signin=failed" and a.cookie is b.cookie is None


@pytest.mark.parametrize("forged", [
    {"origin": "https://evil.example"},  # login CSRF from another site
    {"origin": None, "referer": None},
    {"origin": "null"},
    {"xsrf": ""},  # the form without the page's token
    {"xsrf": generate_xsrf_token_string()},  # another browser's token
    {"xsrf_cookie": None},
    {"host": None},
])
def test_a_sign_in_from_another_origin_or_without_the_xsrf_token_is_refused(ws, forged):
    out = sign_in(ws, attempt(**forged), xsrf_on=True)
    assert out.cookie is None and out.location.endswith("signin=expired")


def test_a_referer_stands_in_for_a_missing_origin_and_xsrf_off_skips_only_the_token(ws):
    assert sign_in(ws, attempt(origin=None, referer=f"https://{HOST}/users"), xsrf_on=True).cookie
    assert sign_in(ws, attempt(xsrf=""), xsrf_on=False).cookie
    assert sign_in(ws, attempt(xsrf="", origin="https://evil.example"), xsrf_on=False).cookie is None


@pytest.mark.parametrize(("raw", "safe"), [
    ("/users?user=1000&tab=Timeline", "/users?user=1000&tab=Timeline"),
    ("//evil.example/path", "/"), ("https://evil.example/", "/"), ("/\\evil.example", "/"),
    ("javascript:alert(1)", "/"), ("", "/"), (None, "/"), ("/\x0a/evil", "/"),
    ("/review?signin=failed&batch=b1", "/review?batch=b1"),
])
def test_the_page_to_return_to_stays_on_this_origin(raw, safe):
    assert safe_next(raw) == safe


def test_a_role_lands_on_its_first_page_instead_of_a_forbidden_one(ws):
    """Audit finding 25: an annotator signing in at "/" (or a link to an admin page) landed on "not available"."""
    assert landing("/settings", "annotator") == "/" and landing("/review?batch=b", "annotator") == "/review?batch=b"
    assert landing("/", "annotator") == "/" and landing("/settings", "admin") == "/settings"
    assert sign_in(ws, attempt(name="ann", next_path="/evaluate"), xsrf_on=True).location == "/"


def test_the_throttle_waits_after_five_failures_and_says_how_long(ws):
    ws.sign_in_throttle = SignInThrottle(base_s=60)
    for _ in range(5):
        assert sign_in(ws, attempt(password="wrong-password"), xsrf_on=True).location.endswith("signin=failed")
    out = sign_in(ws, attempt(), xsrf_on=True)  # even the right password waits
    assert out.cookie is None and out.location.endswith("signin=wait-60")


def test_the_throttle_counts_the_visitor_behind_a_trusted_proxy(ws, monkeypatch):
    monkeypatch.setenv("PAL_TRUST_PROXY", "1")
    ws.sign_in_throttle = SignInThrottle(base_s=60)
    for i in range(5):  # each guess claims a new address on the left; the proxy's hop is the same
        sign_in(ws, attempt(name=f"n{i}", password="wrong-password", forwarded_for=f"10.0.0.{i}, 198.51.100.7"),
                xsrf_on=True)
    assert sign_in(ws, attempt(forwarded_for="1.1.1.1, 198.51.100.7"), xsrf_on=True).cookie is None
    assert sign_in(ws, attempt(forwarded_for="198.51.100.8"), xsrf_on=True).cookie  # another visitor


@pytest.fixture
def client(ws, monkeypatch):
    import ui.platform_state

    monkeypatch.setattr(ui.platform_state, "home_workspace", lambda: ws)
    app = Starlette(routes=web_auth.routes())
    with TestClient(app, base_url=f"http://{HOST}", follow_redirects=False) as c:
        c.cookies.set("_streamlit_xsrf", XSRF)
        yield c


def post(client, headers=None, **fields):
    data = {"pal_name": "boss", "pal_password": PASSWORD, "pal_next": "/memory?user=1001", "pal_xsrf": XSRF, **fields}
    return client.post("/auth/sign-in", data=data, headers={"Origin": f"http://{HOST}", **(headers or {})})


def test_the_route_sets_an_httponly_lax_cookie_and_redirects(client, ws):
    r = post(client)
    assert r.status_code == 303 and r.headers["location"] == "/memory?user=1001"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("pal_session=") and "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert "Path=/" in cookie and "Secure" not in cookie and "Max-Age=604800" in cookie
    assert r.headers["cache-control"] == "no-store"
    value = cookie.split(";")[0].split("=", 1)[1]
    assert ws.sessions.resolve(value, page=page_token(XSRF), origin=f"http://{HOST}").name == "boss"


def test_the_cookie_is_secure_behind_tls_but_only_a_trusted_proxy_says_so(client, monkeypatch):
    assert "Secure" not in post(client, headers={"X-Forwarded-Proto": "https"}).headers["set-cookie"]
    monkeypatch.setenv("PAL_TRUST_PROXY", "testclient")  # the test client's peer name
    cookie = post(client, headers={"X-Forwarded-Proto": "https"}).headers["set-cookie"]
    assert cookie.startswith("__Host-pal_session=") and "Secure" in cookie and "Path=/" in cookie
    assert "domain" not in cookie.lower()


def test_a_sign_in_posted_from_another_port_or_outside_the_public_origins_is_refused(client, monkeypatch):
    """A page on another port of the same host is another origin; with PAL_PUBLIC_URL only its origins sign in."""
    assert post(client, headers={"Origin": f"http://{HOST}:8793"}).headers["location"].endswith("signin=expired")
    monkeypatch.setenv("PAL_PUBLIC_URL", "https://pal.other.example")
    assert post(client).headers["location"].endswith("signin=expired")
    monkeypatch.setenv("PAL_PUBLIC_URL", f"http://{HOST}")
    assert "set-cookie" in post(client).headers


def test_the_route_refuses_oversized_forms_and_is_off_in_local_mode(client, monkeypatch):
    r = post(client, pal_password="x" * 20_000)
    assert r.status_code == 400 and "set-cookie" not in r.headers
    monkeypatch.setenv("PAL_AUTH", "local")
    assert post(client).status_code == 404
    assert client.get("/auth/sign-in").status_code == 405
    assert web_auth.mounted()
