"""End to end in Chromium: a live simulation says where it is (turn n of N, phase, elapsed, ETA) while it runs,
why it ended once it has, and its trace opens from the run as the tree of its calls. Screenshots go to
``PAL_SHOTS`` when set (the issue's note)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from palset.loader import load_dataset
from sim.schedule import fixed_schedule
from testkit.browser import browser_page, chromium_available, running_app, wait_idle
from testkit.fault_server import FaultServer
from tests.conftest import DEMO
from tests.e2e.test_simulate_browser import CHAT, SAMPLE, TOPIC, UID, fake_llm

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]


def shot(page, name: str) -> None:
    if folder := os.environ.get("PAL_SHOTS"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def slow_llm(body: dict) -> tuple[int, dict, bytes]:
    time.sleep(0.8)
    return fake_llm(body)


@pytest.mark.slow(seconds=60)
def test_a_live_run_says_turn_phase_and_eta_then_why_it_ended_and_links_its_trace(tmp_path, monkeypatch):
    turns = len(fixed_schedule(load_dataset(DEMO), f"{SAMPLE}_{TOPIC}")[0])
    server = FaultServer(default=slow_llm)
    with server.running():
        env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_DEFAULT_PROVIDER": "openai",
               "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "fake",
               "PAL_DEFAULT_STRUCTURED_MODE": "prompt"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        with running_app(env=env) as url, browser_page(height=1600) as page:
            page.goto(f"{url}/simulate?user={UID}&method=vanilla-log")
            page.get_by_role("button", name="Start").click(timeout=45_000)
            status = page.get_by_text(re.compile(rf"turn \d+ of {turns} · .* elapsed")).first
            status.wait_for(timeout=60_000)
            page.wait_for_selector(CHAT, timeout=60_000)
            page.get_by_text(re.compile(r"left \(.* per utterance, measured on this run\)")).first.wait_for(
                timeout=60_000)
            text = status.inner_text()
            assert re.search(r"(drafting|asked again|composing|writing)", text), text
            assert "[0/1]" not in page.inner_text("body")  # the job's unit count is not what the run shows
            assert page.get_by_role("button", name="Start").count() == 0  # the setup is gone, not greyed out
            shot(page, "simulate-live")
            page.wait_for_selector("text=Export Markdown", timeout=120_000)
            wait_idle(page)
            assert page.get_by_text(f"finished: all {turns} scheduled turn(s) done").count() >= 1
            assert page.locator(CHAT).count() == 2 * turns
            shot(page, "simulate-ended")
            page.get_by_text("Trace of its LLM calls").first.click()
            page.get_by_role("heading", name="Traces").wait_for(timeout=60_000)
            wait_idle(page)
            body = page.inner_text("body")
            assert "simulation · user" in body and "LLM calls" in body
            page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=30_000)
            shot(page, "trace-simulation")
