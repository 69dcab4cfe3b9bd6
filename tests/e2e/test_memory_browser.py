"""End to end: the Memory page in headless Chromium, on a build made beforehand with the same stores."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from palset.loader import load_dataset
from testkit.browser import browser_page, chromium_available, running_app, show_whole_memory_graph
from tests.conftest import DEMO, read, write
from tests.pages.apptest import app_workspace

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]

GRAPH_FRAME = "iframe[srcdoc*='vis.Network']"


@pytest.fixture
def pal_env(tmp_path, monkeypatch) -> dict[str, str]:
    """PAL_HOME and the hash embedder, for this process (the prebuild) and the app alike."""
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def prebuild(root, uid: str, method: str = "rag-turn") -> None:
    app_workspace().open_builder(load_dataset(root), uid, method).run()


def _external(requests: list[str]) -> list[str]:
    return [u for u in requests if urlparse(u).hostname not in ("127.0.0.1", "localhost", None)
            and not u.startswith(("data:", "blob:", "about:"))]


def _graph(page):
    page.wait_for_selector(GRAPH_FRAME, state="attached", timeout=45_000)
    frame = page.frame_locator(GRAPH_FRAME)
    frame.locator("#mynetwork canvas").wait_for(state="attached", timeout=30_000)
    return frame


def test_graph_renders_nodes_without_external_requests(pal_env):
    prebuild(DEMO, "1001")
    with running_app(env=pal_env) as url, browser_page(height=1600) as page:
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"{url}/memory?user=1001&method=rag-turn&session=1001_sample2")
        _graph(page)
        show_whole_memory_graph(page)
        _graph(page)
        assert page.get_by_text("18 / 18").count() >= 1
        frame = next(f for f in page.frames if f.evaluate("typeof network !== 'undefined'"))
        count = frame.evaluate("network.body.data.nodes.length")
        assert count > 50  # user, sessions, turns and logs of the first three sessions
        assert frame.evaluate("network.getPositions(['user'])['user'].x") is not None
        label = frame.evaluate("network.body.data.nodes.get('user').label")
        assert label == "Dale Brennan"
        assert _external(requests) == []


def test_injected_markup_in_a_log_never_executes(pal_env, small_release):
    path = small_release / "input.json"
    data = read(path)
    data["0000"]["history"][0]["logs"][0]["content"] = "<img src=x onerror=\"window.__pwned=1\"> payment href"
    data["0000"]["history"][0]["logs"][1]["content"] = "<script>window.__pwned=2</script>"
    write(path, data)
    prebuild(small_release, "0000")
    sample = load_dataset(small_release).users["0000"].sessions[0].sample_id
    env = {**pal_env, "PAL_DATASETS": f"evil={small_release}"}
    with running_app(env=env) as url, browser_page(height=1600) as page:
        page.goto(f"{url}/memory?dataset=evil&user=0000&method=rag-turn&session={sample}&item={sample}_log0")
        _graph(page)
        frame = next(f for f in page.frames if f.evaluate("typeof network !== 'undefined'"))
        label = frame.evaluate(f"network.body.data.nodes.get('{sample}_log0').label")
        assert "<img src=x" in label  # shown as the text it is
        # hover every node so each tooltip is drawn
        frame.evaluate("""() => { const ids = network.body.data.nodes.getIds();
            for (const id of ids) { network.selectNodes([id]);
                                    const t = network.body.data.nodes.get(id).title;
                                    if (t instanceof Element) document.body.appendChild(t); } }""")
        page.wait_for_timeout(1000)
        assert all(f.evaluate("window.__pwned") is None for f in page.frames)
        assert frame.locator("img[src='x']").count() == 0
        assert page.get_by_text("payment href").count() >= 1
        assert page.locator("img[src='x']").count() == 0
