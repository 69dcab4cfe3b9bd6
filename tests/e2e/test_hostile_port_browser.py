"""Session riding and stale pages, in headless Chromium against the running server (``serve.py``).

* A page served on another loopback port (:mod:`testkit.hostile_page`, a second HTTP server) opens the app's
  websocket with the signed-in visitor's cookies, as the audit did when it read the Audit page back as the admin:
  the websocket is refused and not one frame comes back — directly over HTTP, and through Debian's nginx with TLS and
  ``PAL_PUBLIC_URL``, where the session cookie is ``__Host-`` (Secure) and never reaches the plain-HTTP port.
* A Review page left open after its account was signed out, demoted or removed: a click on an answer stores nothing
  (the widget's callback never runs) and the page shows the sign-in.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest

from palset.dataset import dataset_key
from palset.loader import load_dataset
from review.batches import plan_batch, quality_candidates
from testkit.browser import CHROMIUM, CHROMIUM_ARGS, chromium_available, free_port, running_app, wait_idle
from testkit.hostile_page import hostile_page
from testkit.proxy import nginx_available, running_nginx
from tests.conftest import DEMO
from tests.pages.apptest import app_workspace

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow(seconds=120),
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]
PASSWORD = "correct-horse"
NAME = "pal.lab.test"


@pytest.fixture
def lab_env(tmp_path, monkeypatch) -> dict[str, str]:
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "accounts"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app_workspace().accounts.add("boss", "admin", PASSWORD)
    return env


def _sign_in(page, name: str, password: str = PASSWORD) -> None:
    page.get_by_role("textbox", name="Name", exact=True).fill(name)
    page.get_by_role("textbox", name="Password", exact=True).fill(password)
    with page.expect_navigation(timeout=60_000):
        page.get_by_role("button", name="Sign in", exact=True).click()


def _ride(ctx, stream_url: str, host: str = "127.0.0.1"):
    """Open the hostile page (on ``host``, another port) in the visitor's browser; (what its websocket saw, the
    cookies its server received)."""
    with hostile_page(stream_url) as hostile:
        page = ctx.new_page()
        page.goto(hostile.url.replace("127.0.0.1", host))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and page.evaluate("window.riding.state") in ("opening", "open"):
            time.sleep(0.3)
        time.sleep(1.0)  # frames that would follow a refusal-free open
        riding = page.evaluate("window.riding")
        page.close()
        return riding, list(hostile.cookies)


def test_a_page_on_another_port_cannot_ride_the_session(lab_env):
    from playwright.sync_api import sync_playwright

    with running_app(env=lab_env) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context()
            page = ctx.new_page()
            page.goto(f"{url}/audit")
            _sign_in(page, "boss")
            page.get_by_text("Signed in as").wait_for(timeout=60_000)
            riding, _ = _ride(ctx, url.replace("http", "ws", 1) + "/_stcore/stream")
            assert riding["frames"] == 0 and riding["state"] != "open", riding
            page.reload()  # the admin's own page still works
            page.get_by_text("Signed in as").wait_for(timeout=60_000)
        finally:
            browser.close()


@pytest.mark.skipif(not nginx_available(), reason="Debian nginx (and openssl) not installed (make proxy)")
def test_behind_nginx_with_tls_the_cookie_is_host_prefixed_and_other_origins_are_refused(lab_env, tmp_path):
    from playwright.sync_api import sync_playwright

    app_port = free_port()
    with running_nginx(app_port, tmp_path / "nginx") as loopback:
        # the lab's host name (Chromium sends Secure cookies to plain-HTTP loopback addresses, never to a name)
        proxy = loopback.replace("127.0.0.1", NAME)
        env = {**lab_env, "PAL_TRUST_PROXY": "1", "PAL_PUBLIC_URL": proxy}
        with running_app(env=env, port=app_port, args=["--server.enableXsrfProtection", "true"]) as url, \
                sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM,
                                        args=[*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {NAME} 127.0.0.1"])
            try:
                ctx = browser.new_context(ignore_https_errors=True)
                page = ctx.new_page()
                page.goto(f"{proxy}/audit")
                _sign_in(page, "boss")
                page.get_by_text("Signed in as").wait_for(timeout=60_000)
                cookies = {c["name"]: c for c in ctx.cookies()}
                session = cookies["__Host-pal_session"]
                assert session["secure"] and session["httpOnly"] and session["path"] == "/"
                assert "pal_session" not in cookies
                riding, received = _ride(ctx, proxy.replace("https", "wss", 1) + "/_stcore/stream", host=NAME)
                assert received  # the page was served on the same host name, and the browser sent it its cookies
                assert riding["frames"] == 0 and riding["state"] != "open", riding
                assert not any("__Host-pal_session" in c for c in received)  # Secure: never sent to a plain port
                try:  # the app itself answers only the public origin's Host
                    status = urllib.request.urlopen(f"{url}/", timeout=30).status
                except urllib.error.HTTPError as e:
                    status = e.code
                assert status == 403
                page.reload()
                page.get_by_text("Signed in as").wait_for(timeout=60_000)
            finally:
                browser.close()


@pytest.mark.parametrize("change", ["sign-out", "demote", "remove"])
def test_a_click_on_a_page_left_open_after_the_account_lost_access_writes_nothing(lab_env, change):
    ws = app_workspace()
    ws.accounts.add("ann", "annotator", PASSWORD)
    store = ws.reviews
    batch = store.create_batch(plan_batch("Stale", "quality", dataset_key(DEMO),
                                          quality_candidates(load_dataset(DEMO)), 2, 7, 1, ["ann"]), "boss")
    from playwright.sync_api import sync_playwright

    with running_app(env=lab_env) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.goto(f"{url}/review?batch={batch}")
            _sign_in(page, "ann")
            page.get_by_role("button", name="Start").click(timeout=90_000)
            page.get_by_text("Item 1 of 2").wait_for(timeout=90_000)
            wait_idle(page)
            if change == "sign-out":
                ws.sessions.end_all("ann")
            elif change == "demote":
                ws.accounts.set_role("ann", "researcher")
            else:
                ws.accounts.remove("ann")
            page.get_by_role("button", name="3 · good").first.click()
            page.get_by_text("Sign in to continue").wait_for(timeout=90_000)
            wait_idle(page)
            assert store.answers(batch) == []
            assert page.get_by_text("Reviewing as").count() == 0
        finally:
            browser.close()
