"""End to end: an annotator signs in on the Review page in headless Chromium and answers a quality batch
with the keyboard shortcuts alone (1/2/3 answer the highlighted question)."""

from __future__ import annotations

import re
import time

import pytest

from palset.dataset import dataset_key
from palset.loader import load_dataset
from review.batches import plan_batch, quality_candidates
from testkit.browser import browser_page, chromium_available, running_app, wait_idle
from tests.conftest import DEMO
from tests.pages.apptest import app_workspace

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]

PASSWORD = "correct-horse"
KEYS = {1: ("3", "1"), 2: ("2", "3"), 3: ("1", "2")}  # item -> (logs, dialogue)


@pytest.fixture
def pal_env(tmp_path, monkeypatch) -> dict[str, str]:
    """PAL_HOME and the hash embedder, for this process (accounts, batch, answers) and the app alike."""
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "accounts"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def _wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _focused_question(page, label: str) -> None:
    """Wait until the ``keys 1 2 3`` hint sits on ``label`` (the shortcuts are bound to that question)."""
    page.locator("[data-testid='stMarkdownContainer']", has_text=re.compile(
        re.escape(label) + r"\s*·\s*keys 1 2 3")).first.wait_for(timeout=90_000)


def _answer_with_key(page, label: str, key: str, answered, what: str) -> None:
    """Press ``key`` for the question ``label`` once the shortcuts sit on it and the app is idle, then wait for
    the answer. Pressing again after a while (as this test once did) answered the next question when the first
    press was only slow to arrive on a loaded machine; a press made while the app is idle is not lost."""
    _focused_question(page, label)
    wait_idle(page)
    _blur(page)
    page.keyboard.press(key)
    _wait_for(answered, timeout=120.0, what=what)


def _blur(page) -> None:
    """Take focus out of any input so single-key shortcuts reach the app."""
    page.keyboard.press("Escape")
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.locator("[data-testid='stMain'] h1").first.click()  # the page title: plain background text


def test_annotator_answers_a_quality_batch_with_the_keyboard(pal_env):
    accounts = app_workspace().accounts
    accounts.add("ann", "annotator", PASSWORD)
    store = app_workspace().reviews
    batch = store.create_batch(plan_batch("Keys", "quality", dataset_key(DEMO), quality_candidates(load_dataset(DEMO)),
                                          3, 7, 1, ["ann"]), "admin")
    mine = store.assigned(batch, "ann")
    assert len(mine) == 3

    with running_app(env=pal_env) as url, browser_page(height=1800) as page:
        page.goto(f"{url}/review")
        page.get_by_role("textbox", name="Name", exact=True).fill("ann")
        page.get_by_role("textbox", name="Password", exact=True).fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_text("Signed in as").wait_for(timeout=90_000)
        page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Open", exact=True).click()
        page.get_by_text("Guidelines").first.wait_for(timeout=90_000)
        page.get_by_role("button", name="Start").wait_for()
        _blur(page)
        page.keyboard.press("Enter")  # Start has shortcut Enter
        page.get_by_text("Item 1 of 3").wait_for(timeout=90_000)

        expected: dict[tuple[int, str], str] = {}
        for pos, item_no in enumerate(mine, start=1):
            logs, dialogue = KEYS[pos]
            page.get_by_text(f"Item {pos} of 3").wait_for(timeout=90_000)
            assert f"item={item_no}" in page.evaluate("location.href")
            for question, label, key in (("logs", "The logs reflect the situation", logs),
                                         ("dialogue", "The dialogue fits the user's profile and preferences",
                                          dialogue)):
                expected[(item_no, question)] = key
                _answer_with_key(page, label, key, lambda: len(store.answers(batch, "ann")) == len(expected),
                                 f"answer {question} of item {item_no}")

        page.get_by_text("All 3 items done").wait_for(timeout=90_000)
        assert page.locator("[data-testid='stProgress']", has_text="3/3 done").count() == 1
        assert "item=" not in page.evaluate("location.href")

    rows = store.answers(batch, "ann")
    assert len(rows) == 6
    assert {(r["item_no"], r["question"]): r["value"] for r in rows} == expected
    assert {r["annotator"] for r in rows} == {"ann"}
    assert store.progress(batch, "quality", "ann") == (3, 3)
