"""Make the guide's screenshots (``docs/img/*.png``) by driving the real app in Debian's headless Chromium.

The app runs as ``make run`` runs it — one local person, the bundled demo workspace imported into a fresh home —
and the script walks the tour from the home page, keeping the stops each page guide shows, then opens the pages
the tour does not visit. Needs ``chromium`` (``make browser``); takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from testkit.browser import browser_page, chromium_available, running_app, wait_idle  # noqa: E402  (root on the path first)

IMG = ROOT / "docs" / "img"
BUNDLE = ROOT / "data" / "demo" / "workspace.palbundle"
TOUR_SHOTS = {1: "users", 7: "memory", 11: "simulate", 12: "evaluate", 14: "review"}  # tour stop → guide picture
PAGE_SHOTS = {"generate": "generate", "settings": "settings", "audit": "audit", "traces": "traces"}  # url path → guide picture
WIDTH, HEIGHT = 1400, 1800  # the guide shows a page's first two screens


def shoot(page, name: str) -> None:
    wait_idle(page, timeout_ms=240_000)
    page.wait_for_timeout(1500)  # charts and graphs draw after the script run ends
    exceptions = page.locator("[data-testid='stException']").count()
    if exceptions:
        raise RuntimeError(f"{name}: the page shows {exceptions} exception(s)")
    page.screenshot(path=str(IMG / f"{name}.png"))
    print(f"docs/img/{name}.png")


def walk(url: str, only: set[str]) -> None:
    titles = [s["title"] for s in json.loads((ROOT / "data" / "demo" / "tour.json").read_text(encoding="utf-8"))]
    with browser_page(width=WIDTH, height=HEIGHT) as page:
        page.goto(url)
        page.get_by_role("button", name="Start the tour").wait_for(timeout=240_000)
        if not only or "home" in only:
            shoot(page, "home")
        page.get_by_role("button", name="Start the tour").click()
        for n in range(1, len(titles) + 1):
            page.get_by_text(f"Tour · stop {n} of {len(titles)}").first.wait_for(timeout=240_000)
            if n in TOUR_SHOTS and (not only or TOUR_SHOTS[n] in only):
                shoot(page, TOUR_SHOTS[n])
            if n < len(titles) and (not only or any(k > n and v in only for k, v in TOUR_SHOTS.items())):
                page.get_by_role("button", name=f"Next stop: {titles[n]}").click()
        for path, name in PAGE_SHOTS.items():
            if not only or name in only:
                page.goto(f"{url}/{path}")
                shoot(page, name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated picture names (home, users, memory, …)")
    args = ap.parse_args(argv)
    if not chromium_available():
        print("chromium is not installed: run `make browser` first", file=sys.stderr)
        return 1
    IMG.mkdir(parents=True, exist_ok=True)
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    with tempfile.TemporaryDirectory() as home:
        env = {"PAL_HOME": home, "PAL_AUTH": "local", "PAL_DEMO_WORKSPACE": str(BUNDLE)}
        with running_app(env=env, timeout=240) as url:
            walk(url, only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
