"""End to end in Chromium at 1400 px on the demo workspace: a 100-node H²Memory build opens with its searchable
items list first, the graph labelled with the items' text (never ids, Chinese drawn in a CJK font) and focused on
the selected item. Screenshots go to ``PAL_SHOTS`` when set."""

from __future__ import annotations

import os
import re

import pytest

from testkit.browser import browser_page, chromium_available, running_app, wait_idle
from tests.conftest import ROOT
from tests.e2e.test_live_run_browser import shot
from tests.e2e.test_memory_browser import _graph

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]
DEMO_BUNDLE = ROOT / "data" / "demo" / "workspace.palbundle"
ID = re.compile(r"^\d{4}_(sample\d+_|background_|cluster)")


def _network(page):
    return next(f for f in page.frames if f.evaluate("typeof network !== 'undefined'"))


@pytest.mark.slow(seconds=90)
@pytest.mark.skipif(not DEMO_BUNDLE.is_file(), reason="no demo workspace bundle (make demo-workspace)")
def test_a_hundred_node_build_reads_as_a_list_first_and_a_focused_graph(tmp_path):
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_DEMO_WORKSPACE": str(DEMO_BUNDLE)}
    with running_app(env=env, timeout=120) as url, browser_page(width=1400, height=2600) as page:
        page.goto(f"{url}/memory?user=1002&method=h2memory&tab=Snapshot", timeout=120_000)
        page.get_by_role("heading", name=re.compile(r"Items \(\d+\)")).wait_for(timeout=120_000)
        _graph(page)
        wait_idle(page)
        page.get_by_text("Focus on the selected item").wait_for()
        heading = page.get_by_role("heading", name=re.compile(r"Items \(\d+\)")).inner_text()
        n_items = int(re.search(r"\d+", heading).group())
        assert n_items > 40
        network = _network(page)
        labels = network.evaluate("network.body.data.nodes.get().map(n => n.label)")
        assert labels and not [lb for lb in labels if ID.match(lb)]  # text, never an item id
        focused = len(labels)
        shot(page, "memory-1002-h2memory-focused")
        page.get_by_text("Focus on the selected item").click()  # the whole build
        wait_idle(page)
        whole = focused
        for _ in range(40):  # the graph's frame is replaced once the new layout is drawn
            page.wait_for_timeout(500)
            whole = max(whole, *(f.evaluate("typeof network === 'undefined' ? 0 : network.body.data.nodes.length")
                                 for f in page.frames if not f.is_detached()))
            if whole >= 100:
                break
        assert whole >= 100 and focused < whole
        shot(page, "memory-1002-h2memory-whole")
        page.get_by_label("Search the items").fill("sleep")
        page.keyboard.press("Enter")
        wait_idle(page)
        page.get_by_text(re.compile(rf"\d+ of {n_items} items match")).wait_for(timeout=30_000)

        page.goto(f"{url}/memory?user=1006&method=h2memory&tab=Snapshot", timeout=120_000)
        _graph(page)
        wait_idle(page)
        zh = _network(page).evaluate("network.body.data.nodes.get().map(n => n.label)")
        assert any(re.search(r"[\u4e00-\u9fff]", lb) for lb in zh)
        font = _network(page).evaluate("network.body.nodes[network.body.nodeIndices[0]].options.font.face")
        assert "WenQuanYi Micro Hei" in font
        shot(page, "memory-1006-h2memory-zh")
    assert os.environ.get("PAL_SHOTS") is None or (tmp_path / "pal").exists()
