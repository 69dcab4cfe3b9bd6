"""End to end: a demo user's Memory page in headless Chromium opens with the gold memory, built on first use;
its graph shows every H²Memory layer, and moving the time slider redraws it as of an earlier session."""

from __future__ import annotations

import pytest

from testkit.browser import browser_page, chromium_available, running_app, show_whole_memory_graph

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]

GRAPH_FRAME = "iframe[srcdoc*='vis.Network']"
LAYERS = ("_log_graph", "_situation", "_background_", "_topic", "_principle_")


@pytest.fixture
def pal_env(tmp_path) -> dict[str, str]:
    return {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash"}


def _node_ids(page, timeout_ms: int = 45_000) -> list[str]:
    page.wait_for_selector(GRAPH_FRAME, state="attached", timeout=timeout_ms)
    page.frame_locator(GRAPH_FRAME).locator("#mynetwork canvas").wait_for(state="attached", timeout=30_000)
    frame = next(f for f in page.frames if f.evaluate("typeof network !== 'undefined'"))
    return frame.evaluate("network.body.data.nodes.getIds()")


def test_gold_graph_has_its_layers_and_the_slider_changes_it(pal_env):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with running_app(env=pal_env) as url, browser_page(height=1800) as page:
        page.goto(f"{url}/memory?user=1000")
        page.get_by_text("18 / 18").first.wait_for(timeout=60_000)  # built on first use, no button pressed
        assert page.get_by_text("Oracle upper bound").count() >= 1
        show_whole_memory_graph(page)
        latest = _node_ids(page)
        for marker in LAYERS:
            assert any(marker in n for n in latest), marker
        assert any(n.startswith("1000_sample8_situation") for n in latest)
        slider = page.get_by_role("slider", name="Memory as of session")
        assert slider.get_attribute("aria-valuetext").startswith("1000_sample8")
        for _ in range(3):  # Home: the first session (pressed again if a rerun swallowed the key)
            slider.focus()
            slider.press("Home")
            try:
                page.wait_for_function("() => new URLSearchParams(location.search).get('session') === '1000_sample0'",
                                       timeout=15_000)
                break
            except PlaywrightTimeout:  # a key press lost during a rerun on a loaded machine: press it again
                continue
        assert slider.get_attribute("aria-valuetext").startswith("1000_sample0")
        page.wait_for_function(
            "() => [...document.querySelectorAll('iframe')].some(f => (f.srcdoc || '').includes('vis.Network') "
            "&& !f.srcdoc.includes('1000_sample8_situation'))", timeout=45_000)
        first = _node_ids(page)
        assert any(n.startswith("1000_sample0_situation") for n in first)
        assert not any(n.startswith("1000_sample1_") for n in first) and len(first) < len(latest)
        assert any("_background_" in n for n in first)
