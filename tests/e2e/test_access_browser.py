"""End to end in headless Chromium: signed-out visitors see only the sign-in, an annotator cannot reach other
pages by URL and sees pairwise items blinded, and single sign-on against a real OIDC provider
(``oidc-provider-mock`` on 127.0.0.1): sign in, see the role's pages, sign out; an unknown identity gets nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from testkit.browser import browser_page, chromium_available, free_port, running_app
from tests.pages.apptest import app_workspace

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]

PASSWORD = "correct-horse"
FORBIDDEN_FOR_ANNOTATORS = ["evaluate", "settings", "memory", "users", "simulate", "generate", "audit"]


@pytest.fixture
def lab_env(tmp_path, monkeypatch) -> dict[str, str]:
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "accounts"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    accounts = app_workspace().accounts
    accounts.add("boss", "admin", PASSWORD)
    accounts.add("ann", "annotator", PASSWORD, email="ann@lab.example")
    return env


def nav_links(page) -> list[str]:
    """The page titles in the top navigation (none: Streamlit shows no navigation for a single page)."""
    return [t.strip().splitlines()[-1] for t in page.get_by_test_id("stTopNavLink").all_inner_texts()]


def sign_in(page, url: str, name: str, path: str = "review", expect: str = "Reviewing as") -> None:
    """Open ``path`` signed out and sign in there (the form posts to the sign-in route, which sets the cookie)."""
    page.goto(f"{url}/{path}")
    page.get_by_role("textbox", name="Name", exact=True).fill(name)
    page.get_by_role("textbox", name="Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.get_by_text(expect).first.wait_for(timeout=30_000)


def main_text(page) -> str:
    return page.get_by_test_id("stMain").inner_text()


def test_signed_out_pages_show_only_sign_in_and_annotators_cannot_reach_others(lab_env):
    with running_app(env=lab_env) as url, browser_page(height=1400) as page:
        for path in ("evaluate", "settings", "memory"):
            page.goto(f"{url}/{path}")
            page.get_by_role("button", name="Sign in", exact=True).wait_for(timeout=30_000)
            text = main_text(page)
            assert "Judge" not in text and "LLM roles" not in text and "Snapshot" not in text
            assert page.get_by_test_id("stSidebar").count() == 0 or not page.get_by_test_id("stSidebar").is_visible()
            assert page.get_by_test_id("stTopNavLinkContainer").count() == 0
        sign_in(page, url, "boss")
        assert nav_links(page) == ["Home", "Users", "Memory", "Simulate", "Evaluate", "Traces", "Generate", "Review",
                                   "Settings", "Audit"]
        page.get_by_role("button", name="Sign out").click()
        page.get_by_role("button", name="Sign in", exact=True).wait_for(timeout=30_000)
        sign_in(page, url, "ann", "settings")  # a page the role may not open: the sign-in lands on Review
        assert nav_links(page) == [] and page.url == f"{url}/review"  # "/" led on to Review; no navigation elsewhere
        for path in FORBIDDEN_FOR_ANNOTATORS:  # still signed in (the cookie): each says it is not available
            page.goto(f"{url}/{path}")
            page.get_by_text("is not available to your role (annotator)").wait_for(timeout=30_000)
            assert page.locator("[data-testid='stMain'] h1").count() == 0, path
            assert nav_links(page) == []


@contextmanager
def oidc_provider(users: list[dict]):
    port = free_port()
    cmd = [str(Path(sys.executable).with_name("oidc-provider-mock")), "--port", str(port), "--host", "127.0.0.1"]
    for claims in users:
        cmd += ["--user-claims", json.dumps(claims)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/.well-known/openid-configuration", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_single_sign_on_maps_an_identity_to_its_role_and_signs_out(lab_env, tmp_path):
    app_port = free_port()
    with oidc_provider([{"sub": "ann", "email": "ann@lab.example", "email_verified": True},
                        {"sub": "eve", "email": "eve@elsewhere.example", "email_verified": True},
                        {"sub": "mallory", "email": "ann@lab.example", "email_verified": False}]) as issuer:
        secrets = tmp_path / "secrets.toml"
        secrets.write_text(
            "[auth]\n"
            f'redirect_uri = "http://127.0.0.1:{app_port}/oauth2callback"\n'
            'cookie_secret = "a-test-cookie-secret-of-enough-length"\n'
            'client_id = "pal-studio"\n'
            'client_secret = "pal-studio-secret"\n'
            f'server_metadata_url = "{issuer}/.well-known/openid-configuration"\n', encoding="utf-8")
        with running_app(env=lab_env, port=app_port, args=["--secrets.files", str(secrets)]) as url, \
                browser_page(height=1400) as page:
            page.goto(f"{url}/evaluate")
            page.get_by_role("button", name="Sign in with single sign-on").click()
            page.get_by_role("button", name="ann", exact=True).click()  # the provider's predefined user
            page.get_by_text("Reviewing as").wait_for(timeout=30_000)
            assert "ann" in main_text(page) and nav_links(page) == []
            page.goto(f"{url}/settings")
            page.get_by_text("is not available to your role (annotator)").wait_for(timeout=30_000)
            page.get_by_role("button", name="Sign out").click()
            page.get_by_role("button", name="End session").click()  # the provider confirms, then sends us back
            page.get_by_role("button", name="Sign in with single sign-on").wait_for(timeout=30_000)
            assert page.get_by_test_id("stTopNavLinkContainer").count() == 0
            # an identity with no account gets no access
            page.get_by_role("button", name="Sign in with single sign-on").click()
            page.get_by_role("button", name="eve", exact=True).click()
            page.get_by_text("no account has this e-mail address").wait_for(timeout=30_000)
            assert page.get_by_test_id("stTopNavLinkContainer").count() == 0
            assert "Reviewing as" not in main_text(page)
            # audit finding 2: another identity claiming ann's e-mail, unverified, gets nothing
            page.get_by_role("button", name="Sign out").click()
            page.get_by_role("button", name="End session").click()
            page.get_by_role("button", name="Sign in with single sign-on").click()
            page.get_by_role("button", name="mallory", exact=True).click()
            page.get_by_text("the provider has not verified this e-mail address").wait_for(timeout=30_000)
            assert "Reviewing as" not in main_text(page) and page.get_by_test_id("stTopNavLinkContainer").count() == 0


def test_an_annotator_sees_pairwise_items_blinded(lab_env):
    from palset.dataset import dataset_key
    from palset.vocab import Act
    from review.batches import pairwise_candidates, plan_batch
    from sim.types import RunRecord, RunSpec, Utterance
    from tests.conftest import DEMO

    sims, store = app_workspace().sims, app_workspace().reviews
    for method in ("h2memory", "memorybank"):
        spec = RunSpec(dataset=dataset_key(DEMO), user_id="1001", sample_id="1001_sample7", topic_key="topic-1",
                       method=method)
        sims.create(RunRecord(run_id=f"run-{method}", spec=spec, status="finished"))
        sims.add_utterance(f"run-{method}", Utterance(turn_no=1, side="assistant", actor="assistant",
                                                      act=Act.TOPIC_INQUIRY, content=f"A reply of {len(method)} letters"))
    pairs = pairwise_candidates(sims.list(), "h2memory", "memorybank")
    batch = store.create_batch(plan_batch("Blind", "pairwise", dataset_key(DEMO), pairs, 1, 4, 1, ["ann"]), "boss")
    store.answer(batch, 1, "ann", "requirement", "A")
    with running_app(env=lab_env) as url, browser_page(height=1800) as page:
        sign_in(page, url, "ann", f"review?batch={batch}&item=1", expect="Response A")
        for shown in ("Response B", "A reply of 8 letters", "A reply of 10 letters"):  # both sides rendered, not just A
            page.get_by_text(shown).first.wait_for(timeout=30_000)
        text = main_text(page) + page.get_by_test_id("stSidebar").inner_text()
        assert "Response B" in text and "A reply of 8 letters" in text and "A reply of 10 letters" in text
        for secret in ("h2memory", "memorybank", "H²Memory", "MemoryBank", "judge", "majority", "Batch overview"):
            assert secret.lower() not in text.lower(), secret
        assert page.get_by_test_id("stDownloadButton").count() == 0
