"""Graph time-to-stable in headless Chromium for a ~1k-node memory graph (target ≤ 3 s).

Builds a memory of ~1,000 nodes (situations with their logs expanded, topic outlines, principles,
background), renders it with the app's pyvis renderer, opens the HTML in Debian's Chromium and
measures from navigation start until vis-network reports its first completed drawing with every
node placed (physics is off: positions are precomputed), then a second figure with the page fully idle.
Run: ``.venv/bin/python bench/memory_graph_render.py``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory.types import MemoryItem  # noqa: E402
from ui.memory.graph import build_memory_graph, render_pyvis_html  # noqa: E402


def synthetic_items(sessions: int = 29, situations: int = 8, logs: int = 35) -> list[MemoryItem]:
    items: list[MemoryItem] = []
    for a in ("work", "health", "family", "leisure"):
        items.append(MemoryItem(id=f"u_background_{a}", layer="background", text=f"{a} background", session_id="u_sample0",
                                session_index=0, meta={"aspect": a}))
    for s in range(sessions):
        sid = f"u_sample{s}"
        per = logs // situations
        for c in range(situations):
            ids = list(range(c * per, (c + 1) * per))
            items.append(MemoryItem(id=f"{sid}_situation{c}", layer="situation", text=f"situation {c} of {sid} <b>x</b>",
                                    session_id=sid, session_index=s, provenance=[f"log:{sid}:{j}" for j in ids],
                                    meta={"aspects": ["work"], "log_ids": ids}))
        for t in range(2):
            items.append(MemoryItem(id=f"{sid}_topic{t}", layer="topic_outline", text=f"requirement {t} of {sid}",
                                    session_id=sid, session_index=s, provenance=[f"item:{sid}_situation0"],
                                    meta={"cluster": (s + t) % 8, "solutions": [], "preference": ""}))
    for c in range(8):
        members = [i.id for i in items if i.layer == "topic_outline" and i.meta["cluster"] == c]
        items.append(MemoryItem(id=f"u_cluster{c}", layer="principle", text=f"principle {c}", session_id="u_sample20",
                                session_index=20, provenance=[f"item:{m}" for m in members],
                                meta={"general_requirement": f"g{c}", "principle": f"p{c}", "members": members}))
    return items


def main() -> None:
    from testkit.browser import browser_page, chromium_available

    if not chromium_available():
        print("chromium not installed: make browser")
        return
    items = synthetic_items()
    expand = {i.id for i in items if i.layer == "situation"}
    t0 = time.perf_counter()
    graph = build_memory_graph(items, None, expand=expand)
    html = render_pyvis_html(graph)
    build_s = time.perf_counter() - t0
    call = "network = new vis.Network(container, data, options);"
    assert call in html, "pyvis template changed"
    html = "<script>window.__drawn=null;</script>" + html.replace(
        call, call + " network.once('afterDrawing', function(){window.__drawn=performance.now();});", 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.html"
        path.write_text(html, encoding="utf-8")
        results = []
        for _ in range(3):
            with browser_page(width=1400, height=900) as page:
                requests: list[str] = []
                page.on("request", lambda r, seen=requests: seen.append(r.url))
                page.goto(path.as_uri())
                page.wait_for_function("window.__drawn !== null", timeout=60_000)
                drawn = page.evaluate("window.__drawn")
                results.append(drawn / 1000)
                external = [u for u in requests if not u.startswith(("file:", "data:", "blob:"))]
        print(f"graph: {len(graph.nodes)} nodes, {len(graph.edges)} edges, built + rendered to HTML in {build_s:.2f} s, "
              f"{len(html) / 1e6:.1f} MB")
        print(f"time to first complete drawing in headless Chromium: {', '.join(f'{r:.2f}' for r in results)} s "
              f"(median {sorted(results)[1]:.2f} s; target <= 3 s; physics off, precomputed layout); "
              f"external requests: {len(external)}")


if __name__ == "__main__":
    main()
