"""End to end: a presented bundle in headless Chromium — from the home page, Start the tour, then Next stop through
every stop to the last: each page shows its stop's title and paragraph, the presentation banner, no error and
no missing records."""

from __future__ import annotations

import json

import pytest

from palset.loader import load_dataset
from testkit.browser import browser_page, chromium_available, running_app
from testkit.worked import make_tour_bundle
from tests.conftest import DEMO

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]


@pytest.fixture
def presented(tmp_path, monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    bundle = tmp_path / "tour.palbundle"
    make_tour_bundle(tmp_path / "src", load_dataset(DEMO), bundle)
    return {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash", "PAL_PRESENT": str(bundle)}


def test_walk_the_tour_from_the_home_page(presented):
    titles = [s["title"] for s in json.loads((DEMO / "tour.json").read_text(encoding="utf-8"))]
    with running_app(env=presented, timeout=120) as url, browser_page(height=2000) as page:
        page.goto(url)
        page.get_by_text("Presentation: read-only").first.wait_for(timeout=90_000)
        page.get_by_role("button", name="Start the tour").click()
        for n, title in enumerate(titles, start=1):
            bar = page.get_by_text(f"Tour · stop {n} of {len(titles)}: {title}")
            bar.first.wait_for(timeout=90_000)
            assert page.get_by_text("Presentation: read-only").count() >= 1
            assert page.get_by_text("Records missing").count() == 0 and page.get_by_text("yet: run").count() == 0
            assert page.locator("[data-testid='stException']").count() == 0, title
            if n < len(titles):
                page.get_by_role("button", name=f"Next stop: {titles[n]}").click()
        assert page.get_by_text("That was the last stop.").count() == 1
        assert "view=annotator" in page.url and "tour=" in page.url
