"""The server's front door (``serve.py`` → :class:`ui.web_guard.OriginGuard`) against the running app, with a bare
client that forges what a hostile page or a rebound DNS name would send: the websocket's Origin and Host, the cookies
a server on another port of the same host receives, a click on a page left open after its account lost access."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
import websocket

from testkit.browser import running_app
from testkit.streamlit_client import Visitor, run_page
from tests.pages.apptest import app_workspace

pytestmark = [pytest.mark.slow(seconds=8)]
PASSWORD = "correct-horse"


@pytest.fixture
def lab_env(tmp_path, monkeypatch) -> dict[str, str]:
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "accounts"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app_workspace().accounts.add("boss", "admin", PASSWORD)
    return env


def _status(url: str, host: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


def _refused(url: str, page: str, **kw) -> bool:
    try:
        run_page(url, page, **kw)
    except websocket.WebSocketBadStatusException as e:
        return e.status_code == 403
    return False


def test_a_websocket_from_another_port_or_with_the_cookie_alone_rides_nobody(lab_env):
    with running_app(env=lab_env) as url:
        admin = Visitor(url)
        admin.open("/audit")
        assert admin.sign_in("boss", PASSWORD, "/audit") == (303, "/audit")
        cookies, xsrf = admin.cookie_header(), admin.cookie("_streamlit_xsrf")
        _, page = run_page(url, "audit", cookies=cookies, xsrf=xsrf)
        assert "Signed in as" in page
        # a page on another port of the same host opens the websocket with the visitor's cookies: refused
        other_port = url.rsplit(":", 1)[0] + ":8793"
        assert _refused(url, "audit", cookies=cookies, xsrf=xsrf, origin=other_port)
        assert _refused(url, "audit", cookies=cookies, xsrf=xsrf, origin=url.replace("127.0.0.1", "localhost"))
        # the cookie replayed from a plain client with the right Origin but without the page's token: nobody
        _, replayed = run_page(url, "audit", cookies=f"pal_session={admin.cookie('pal_session')}")
        assert "Signed in as" not in replayed and "Sign in to continue" in replayed
        assert _status(f"{url}/_stcore/metrics") == 404


def test_local_mode_answers_only_loopback_names_so_dns_rebinding_reaches_nothing(tmp_path):
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "local"}
    with running_app(env=env, script="serve.py") as url:
        port = url.rsplit(":", 1)[1]
        _, page = run_page(url, "audit")
        assert "Audit" in page
        assert _refused(url, "audit", origin=f"http://evil.example:{port}", host=f"evil.example:{port}")
        assert _refused(url, "audit", origin="http://127.0.0.1:8793")
        assert _status(f"{url}/", host=f"evil.example:{port}") == 403
        assert _status(f"{url}/", host=f"localhost:{port}") == 200
        assert _status(f"{url}/_stcore/metrics") == 404


def test_the_app_started_without_serve_py_still_refuses_a_rebound_host(tmp_path):
    """``streamlit run app.py`` has no guard in front: the page itself refuses a Host that is not this app's."""
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "local"}
    with running_app(env=env, script="app.py") as url:
        port = url.rsplit(":", 1)[1]
        _, page = run_page(url, "audit", origin=f"http://evil.example:{port}", host=f"evil.example:{port}")
        assert "does not answer" in page and "Audit" not in page
