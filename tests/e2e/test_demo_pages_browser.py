"""End to end in Chromium on the demo workspace: its traces (index, a judgment and a build as trees of their calls),
the Simulate page naming the model that made the records, and a review item with its two dialogues first, which
the local admin may preview and annotate. Screenshots go to ``PAL_SHOTS`` when set."""

from __future__ import annotations

import re
import sqlite3

import pytest

from testkit.browser import browser_page, chromium_available, running_app, wait_idle
from tests.e2e.test_live_run_browser import shot
from tests.e2e.test_memory_readable_browser import DEMO_BUNDLE

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
    pytest.mark.skipif(not DEMO_BUNDLE.is_file(), reason="no demo workspace bundle (make demo-workspace)"),
]


@pytest.mark.slow(seconds=90)
def test_traces_defaults_and_review_layout_on_the_demo_workspace(tmp_path):
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_DEMO_WORKSPACE": str(DEMO_BUNDLE)}
    with running_app(env=env, timeout=120) as url, browser_page(width=1400, height=1800) as page:
        page.goto(f"{url}/traces", timeout=120_000)
        page.get_by_text(re.compile(r"\d+ of \d+ run\(s\)")).wait_for(timeout=120_000)
        wait_idle(page)
        body = page.inner_text("body")
        assert "Traces" in body and "judgment" in body and "simulation" in body and "build" in body
        shot(page, "traces-index")
        page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=30_000)

        con = sqlite3.connect(tmp_path / "pal" / "runs.sqlite")  # the app's home, read as it stands
        judgment = con.execute("SELECT judgment_key FROM judgments ORDER BY judgment_key LIMIT 1").fetchone()[0]
        build = con.execute("SELECT build_id FROM memory_builds WHERE method='h2memory' ORDER BY 1 LIMIT 1").fetchone()[0]
        batch = con.execute("SELECT batch_id FROM review_batches WHERE task='pairwise' LIMIT 1").fetchone()[0]
        page.goto(f"{url}/traces?run={judgment}")
        page.get_by_text("judgment · ").first.wait_for(timeout=60_000)
        wait_idle(page)
        assert page.get_by_text(re.compile(r"judge")).count() >= 1
        shot(page, "trace-judgment")
        page.goto(f"{url}/traces?run={build}")
        page.get_by_text(f"memory build {build}").first.wait_for(timeout=60_000)
        wait_idle(page)
        shot(page, "trace-build")

        page.goto(f"{url}/simulate")
        page.get_by_text("The records here were made by").first.wait_for(timeout=60_000)
        wait_idle(page)
        assert page.get_by_text(re.compile("Qwen2.5-Coder-1.5B")).count() >= 1
        shot(page, "simulate-records-model")

        page.goto(f"{url}/review?batch={batch}")
        page.get_by_role("button", name="Annotate this batch yourself").wait_for(timeout=60_000)
        page.get_by_role("button", name="Preview as an annotator").click()
        page.get_by_text("Response A").first.wait_for(timeout=60_000)
        wait_idle(page)
        a = page.get_by_text("Response A").first.bounding_box()
        fold = page.get_by_text("About this user: profile and preferences").first.bounding_box()
        assert a and fold and a["y"] < fold["y"]  # the dialogues first, the profile folded below
        shot(page, "review-item-dialogues-first")
