"""Audit finding 1 against the running server (``serve.py``), with a bare websocket client: reconnecting to a
signed-in admin's Streamlit session id — it appears in every upload URL, so in proxy logs — gives the attacker
that session's widgets but never its identity; the admin's own cookie keeps working for reloads and new tabs."""

from __future__ import annotations

import pytest

from testkit.browser import running_app
from testkit.streamlit_client import Visitor, run_page
from tests.pages.apptest import app_workspace

pytestmark = [pytest.mark.slow(seconds=12)]
PASSWORD = "correct-horse"


@pytest.fixture
def lab_env(tmp_path, monkeypatch) -> dict[str, str]:
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "accounts"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app_workspace().accounts.add("boss", "admin", PASSWORD)
    return env


def test_a_reconnect_with_someone_elses_session_id_is_signed_out(lab_env):
    with running_app(env=lab_env) as url:
        admin = Visitor(url)
        assert admin.open("/audit") == 200
        assert admin.sign_in("boss", PASSWORD, "/audit") == (303, "/audit")
        sid, page = run_page(url, "audit", cookies=admin.cookie_header(), xsrf=admin.cookie("_streamlit_xsrf"))
        assert "Signed in as" in page and "Audit" in page
        # the attacker knows only the session id (from an upload URL): no cookie, no XSRF token
        resumed, attacked = run_page(url, "audit", session_id=sid)
        assert resumed == sid  # Streamlit did hand over the session (its widgets and state)...
        assert "Signed in as" not in attacked and "Sign in to continue" in attacked  # ...but no identity
        assert "auth.sign_in" not in attacked
        # the admin's next connection (a reload, a new tab) is still signed in through the cookie alone
        _, again = run_page(url, "audit", cookies=admin.cookie_header(), xsrf=admin.cookie("_streamlit_xsrf"))
        assert "Signed in as" in again


def test_the_sign_in_route_refuses_a_cross_site_post_and_a_missing_token(lab_env):
    with running_app(env=lab_env) as url:
        visitor = Visitor(url)
        visitor.open("/")
        assert visitor.sign_in("boss", PASSWORD, origin="https://evil.example") == (303, "/?signin=expired")
        bare = Visitor(url)  # never loaded the page: no XSRF cookie
        assert bare.sign_in("boss", PASSWORD) == (303, "/?signin=expired")
        assert visitor.cookie("pal_session") is None and bare.cookie("pal_session") is None


def test_a_visitor_reaching_the_app_directly_cannot_forge_its_address_with_x_forwarded_for(lab_env):
    """Without PAL_TRUST_PROXY the address is the TCP peer, whatever X-Forwarded-For says: uvicorn (under Streamlit)
    would otherwise rewrite the peer of a loopback connection from that header (its FORWARDED_ALLOW_IPS default), so
    someone on the server itself could spread guesses over made-up addresses and never meet the address throttle."""
    with running_app(env=lab_env) as url:
        attacker = Visitor(url)
        attacker.open("/")
        for n in range(5):  # five free failures per address (each guess at another name: no name throttle)
            forged = {"X-Forwarded-For": f"203.0.113.{n + 1}"}
            assert attacker.sign_in(f"guess{n}", "wrong", headers=forged)[1].startswith("/?signin=failed")
        status, where = attacker.sign_in("boss", PASSWORD, headers={"X-Forwarded-For": "198.51.100.7"})
        assert where.startswith("/?signin=wait-"), where
        assert attacker.cookie("pal_session") is None
