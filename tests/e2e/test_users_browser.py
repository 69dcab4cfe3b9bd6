"""End to end: `streamlit run app.py` in a subprocess, driven by Debian's headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
from urllib.parse import urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from testkit.browser import browser_page, chromium_available, running_app
from tests.conftest import read, write

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]


def _external(requests: list[str]) -> list[str]:
    return [u for u in requests if urlparse(u).hostname not in ("127.0.0.1", "localhost", None)
            and not u.startswith(("data:", "blob:"))]


def test_session_deep_link_renders_timeline_and_dialogue(small_release):
    with running_app() as url, browser_page() as page:
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"{url}/users?user=1001&tab=Timeline")
        page.wait_for_selector(".js-plotly-plot .scatterlayer .trace", state="attached", timeout=45_000)
        assert page.locator(".js-plotly-plot .heatmaplayer, .js-plotly-plot .hm").count() >= 1
        assert page.locator(".js-plotly-plot .scatterlayer .trace .points path").count() >= 9  # session markers

        page.goto(f"{url}/users?user=1001&session=1001_sample3")
        page.wait_for_selector("[data-testid='stChatMessage']", timeout=45_000)
        page.wait_for_selector("text=Candidate solutions")
        assert page.locator("[data-testid='stChatMessage']").count() >= 8
        assert page.get_by_text("Solution Feedback").first.is_visible()
        assert "session=1001_sample3" in page.evaluate("location.href")
        assert _external(requests) == []


def test_clicking_a_session_marker_opens_it():
    with running_app() as url, browser_page(height=1200) as page:
        page.goto(f"{url}/users?user=1000&tab=Timeline")
        page.wait_for_selector(".js-plotly-plot .scatterlayer .trace .points path", timeout=45_000)
        marker = page.locator(".js-plotly-plot .scatterlayer .trace .points path").last
        box = marker.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x - 15, y)
        page.mouse.move(x, y)
        page.mouse.click(x, y)
        page.wait_for_selector("[data-testid='stChatMessage']", timeout=30_000)
        href = page.evaluate("location.href")
        assert "tab=Sessions" in href and "session=1000_sample8" in href


def test_injected_markup_never_executes(small_release):
    path = small_release / "input.json"
    data = read(path)
    data["0000"]["history"][0]["logs"][0]["content"] = "<img src=x onerror=\"window.__pwned='log'\">"
    data["0000"]["history"][0]["dialogue"]["turn_1"]["user"]["content"] = "<script>window.__pwned='turn'</script>hi"
    write(path, data)
    bg = read(small_release / "background" / "background.json")
    bg["0000"]["name"] = "<img src=y onerror=\"window.__pwned='name'\">Eve"
    write(small_release / "background" / "background.json", bg)
    with running_app(env={"PAL_DATASETS": f"evil={small_release}"}) as url, browser_page() as page:
        page.goto(f"{url}/users?dataset=evil&user=0000&session=0000_sample0")
        page.wait_for_selector("[data-testid='stChatMessage']", timeout=45_000)
        page.wait_for_timeout(1500)
        assert page.evaluate("window.__pwned") is None
        assert page.get_by_text("<script>window.__pwned='turn'</script>hi").count() == 1
        assert page.locator("img[src='y']").count() == 0
        page.goto(f"{url}/users?dataset=evil")
        page.wait_for_selector("text=Users")
        page.wait_for_timeout(1000)
        assert page.evaluate("window.__pwned") is None


def test_chinese_user_renders_with_a_cjk_font():
    if shutil.which("fc-list"):
        fonts = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout
        assert fonts.strip(), "no CJK font installed (make browser installs fonts-wqy-microhei)"
    with running_app() as url, browser_page() as page:
        page.goto(f"{url}/users?user=1006&session=1006_sample3")
        page.wait_for_selector("[data-testid='stChatMessage']", timeout=45_000)
        # the first paint can still be the previous rerun's (English) session: wait for the deep link's
        try:
            page.wait_for_function(
                """() => [...document.querySelectorAll("[data-testid='stChatMessage']")]
                         .some(m => /[\u4e00-\u9fff]/.test(m.innerText))""", timeout=20_000)
        except PlaywrightTimeout:
            pytest.fail("no chat message of user 1006 shows Chinese text: "
                        + page.locator("[data-testid='stChatMessage']").first.inner_text()[:200])
        # a CJK string must not render as equal-width fallback boxes: compare glyph widths
        widths = page.evaluate(
            """() => { const c = document.createElement('canvas').getContext('2d');
                       c.font = '20px sans-serif';
                       return [c.measureText('罗晓岚').width, c.measureText('\\u0378\\u0378\\u0378').width]; }"""
        )
        assert widths[0] > 0 and widths[0] != widths[1]
