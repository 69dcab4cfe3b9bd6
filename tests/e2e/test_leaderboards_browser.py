"""End to end in Chromium on the demo workspace: the Evaluate page's leaderboards lead with their takeaways (a
headline per method, the methods that cannot be told apart), the fidelity board's reference rows are collapsed under
the methods, the empty single-turn board names the command that fills it, and the FairEval pair says who wins.
Screenshots of each board (1400 px wide) go to ``PAL_SHOTS`` when set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.browser import browser_page, chromium_available, running_app, wait_idle
from tests.e2e.test_memory_readable_browser import DEMO_BUNDLE

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
    pytest.mark.skipif(not DEMO_BUNDLE.is_file(), reason="no demo workspace bundle (make demo-workspace)"),
]

BOARDS = {  # screenshot name → the board's header on the page, in page order
    "single-turn": "Single-turn leaderboard",
    "fidelity": "Memory fidelity against the gold memory",
    "simulator": "Simulator fidelity",
    "faireval": "Multi-turn: FairEval pairwise judging",
}
END = "Judge–human agreement"


def board_shots(page) -> None:
    """Each board from its header to the next one (the page drawn in one tall viewport, so boxes are page
    coordinates)."""
    folder = os.environ.get("PAL_SHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    tops = {}
    for name, header in [*BOARDS.items(), ("end", END)]:
        box = page.get_by_role("heading", name=header).first.bounding_box()
        assert box, header
        tops[name] = box["y"]
    for name in BOARDS:
        top = tops[name] - 10
        bottom = min([y for y in tops.values() if y > tops[name]] or [top + 1600])
        page.screenshot(path=str(Path(folder) / f"leaderboard-{name}.png"), full_page=True,
                        clip={"x": 0, "y": top, "width": 1400, "height": min(max(bottom - top, 200), 2400)})


@pytest.mark.slow(seconds=90)
def test_the_leaderboards_lead_with_their_takeaways_on_the_demo_workspace(tmp_path):
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_DEMO_WORKSPACE": str(DEMO_BUNDLE)}
    with running_app(env=env, timeout=120) as url, browser_page(width=1400, height=7000) as page:
        page.goto(f"{url}/evaluate?section=leaderboards&pair=rag-turn__vanilla-log&aspect=both", timeout=120_000)
        page.get_by_text("of the requirements gold holds").first.wait_for(timeout=180_000)
        assert page.get_by_role("heading", name=BOARDS["faireval"]).count() == 0  # the link draws the boards only
        page.get_by_text("Show FairEval pairwise judging").first.click()
        page.get_by_text(" beats ").first.wait_for(timeout=120_000)
        wait_idle(page, timeout_ms=120_000)
        main = page.locator("[data-testid='stMain']").inner_text()
        assert page.locator("[data-testid='stException']").count() == 0
        assert "Turn-level RAG keeps" in main and "cannot be told apart" in main  # a headline per method, ties named
        assert "pal bench-tasks --dataset" in main  # the empty single-turn board says what to run
        assert "its verdicts match the hidden preferences" in main  # the simulator board's headline
        summary = page.locator("[data-testid='stExpander'] summary").filter(has_text="what a method must beat")
        assert summary.count() == 1
        refs = summary.locator("xpath=..")  # its <details>
        assert refs.get_attribute("open") is None  # collapsed under the methods
        assert not refs.get_by_text("empty memory").first.is_visible()
        headers = page.locator("[data-testid='stDataFrame']").first  # the methods' table, metrics first
        assert headers.is_visible()
        fidelity_top = page.get_by_role("heading", name=BOARDS["fidelity"]).bounding_box()
        chart = page.locator(".js-plotly-plot").first.bounding_box()  # single-turn is empty: the fidelity chart
        table = page.locator("[data-testid='stDataFrame']").first.bounding_box()
        assert fidelity_top and chart and table and fidelity_top["y"] < chart["y"] < table["y"]  # chart above table
        board_shots(page)
        summary.click()
        refs.get_by_text("empty memory").first.wait_for(timeout=30_000)
