"""Behind a real reverse proxy: Debian's nginx with ``deploy/nginx.conf.template`` (docs/deployment.md's configuration) in
front of ``serve.py`` with ``PAL_AUTH=accounts``, XSRF protection on and ``PAL_TRUST_PROXY=1``; TLS with a
certificate made here; headless Chromium through it. Two visitors come from different loopback addresses (real TCP
peers of nginx, through :func:`testkit.proxy.tcp_forwarder`), so the throttle sees the address nginx saw.

A sign-in survives a reload and a new tab and opens the deep link asked for; the cookie is HttpOnly, Secure and
SameSite=Lax; repeated wrong passwords from one address (whatever ``X-Forwarded-For`` the browser adds) are
throttled while the other address signs in."""

from __future__ import annotations

import re

import pytest

from testkit.browser import CHROMIUM, CHROMIUM_ARGS, chromium_available, running_app
from testkit.proxy import nginx_available, running_nginx, tcp_forwarder
from tests.pages.apptest import app_workspace

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow(seconds=90),
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
    pytest.mark.skipif(not nginx_available(), reason="Debian nginx (and openssl) not installed (make proxy)"),
]
PASSWORD = "correct-horse"


@pytest.fixture
def lab_env(tmp_path, monkeypatch) -> dict[str, str]:
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "accounts", "PAL_TRUST_PROXY": "1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app_workspace().accounts.add("boss", "admin", PASSWORD)
    app_workspace().accounts.add("ann", "annotator", PASSWORD)
    return env


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _sign_in(page, name: str, password: str) -> None:
    """Fill the form and submit it; returns once the route's redirect has been followed (the next page loads)."""
    page.get_by_role("textbox", name="Name", exact=True).fill(name)
    page.get_by_role("textbox", name="Password", exact=True).fill(password)
    with page.expect_navigation(timeout=60_000):
        page.get_by_role("button", name="Sign in", exact=True).click()


def test_sign_in_reload_deep_link_and_throttle_through_nginx(lab_env, tmp_path):
    from playwright.sync_api import sync_playwright

    with running_app(env=lab_env, args=["--server.enableXsrfProtection", "true"]) as app, \
            running_nginx(_port(app), tmp_path / "nginx") as proxy, \
            tcp_forwarder(_port(proxy), "127.0.0.2") as port_a, tcp_forwarder(_port(proxy), "127.0.0.3") as port_b, \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            site_a, site_b = f"https://127.0.0.1:{port_a}", f"https://127.0.0.1:{port_b}"
            # a visitor from 127.0.0.2 opens a deep link signed out, signs in and lands on it
            ctx = browser.new_context(ignore_https_errors=True, viewport={"width": 1400, "height": 1200})
            page = ctx.new_page()
            page.goto(f"{site_a}/users?user=1001&tab=Timeline")
            _sign_in(page, "boss", PASSWORD)
            page.get_by_text("Signed in as").wait_for(timeout=60_000)
            assert page.url == f"{site_a}/users?user=1001&tab=Timeline"
            page.get_by_role("heading", name="Dale Brennan").wait_for(timeout=60_000)
            cookie = next(c for c in ctx.cookies() if c["name"] == "__Host-pal_session")  # TLS: Secure, host-only
            assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Lax"
            page.reload()  # F5
            page.get_by_role("heading", name="Dale Brennan").wait_for(timeout=60_000)
            assert page.get_by_text("Signed in as").count() == 1 and page.locator("#pal-signin-name").count() == 0
            tab = ctx.new_page()  # a new tab on another deep link
            tab.goto(f"{site_a}/review")
            tab.get_by_text("Reviewing as").wait_for(timeout=60_000)
            ctx.close()

            # another visitor on 127.0.0.2 guesses (forging X-Forwarded-For does not change who nginx saw)
            spray = browser.new_context(ignore_https_errors=True, extra_http_headers={"X-Forwarded-For": "203.0.113.9"})
            guess = spray.new_page()
            guess.goto(f"{site_a}/")
            for i in range(5):
                _sign_in(guess, f"guess{i}", "wrong-password")
                guess.get_by_text("Unknown name or wrong password.").wait_for(timeout=60_000)
            # past the free attempts each counted failure doubles the wait (1 s, 2 s, 4 s…): guess on until the
            # address must wait 32 s or more, longer than a loaded machine takes to fill the next form and load the
            # page it redirects to (16 s was once too short in a loaded make test)
            for i in range(5, 80):
                _sign_in(guess, f"guess{i}", "wrong-password")
                guess.get_by_text(re.compile("Unknown name or wrong password|Too many failed sign-ins")).first.wait_for(
                    timeout=60_000)
                waiting = re.search(r"signin=wait-(\d+)", guess.url)
                if waiting and int(waiting.group(1)) >= 32:
                    break
            _sign_in(guess, "boss", PASSWORD)  # the address waits, even with a right password
            guess.get_by_text("Too many failed sign-ins").wait_for(timeout=60_000)
            assert "signin=wait-" in guess.url and guess.get_by_text("Signed in as").count() == 0
            spray.close()

            # a visitor from 127.0.0.3 is not throttled
            other = browser.new_context(ignore_https_errors=True)
            page = other.new_page()
            page.goto(f"{site_b}/review")
            _sign_in(page, "ann", PASSWORD)
            page.get_by_text("Reviewing as").wait_for(timeout=60_000)
            other.close()
        finally:
            browser.close()
    sign_ins = [(e.actor, e.detail.get("client")) for e in app_workspace().audit.entries(action="auth.sign_in")]
    assert sorted(sign_ins) == [("ann", "127.0.0.3"), ("boss", "127.0.0.2")]

