"""Cold and warm page times of the tour's stops on the demo workspace, in headless Chromium (target: cold ≤ 5 s).

For each stop (``data/demo/tour.json``, resolved as the home page's tour links are), a fresh app is started over
a home that already holds the demo workspace (imported and its tour warmed once before timing, as ``make run`` does
on first start),
the stop's URL is opened, and the time from navigation to the page's script being idle with no spinner is the cold
figure; the same URL opened again in the same app is the warm figure. Prints one line per stop and the load
average beside them. ``PAL_BENCH_SETTLE_S`` waits that long between the app's start and the first view (a presenter
starts the app before the tour; its background warm-up, :mod:`ui.warmup`, then has loaded the embedder). Run: ``.venv/bin/python bench/cold_pages.py [stop numbers…]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.config import load_config  # noqa: E402
from palset.loader import load_dataset  # noqa: E402
from palset.names import configured_datasets  # noqa: E402
from studio.presentation import import_once  # noqa: E402
from studio.workspace import Workspace  # noqa: E402
from testkit.browser import browser_page, chromium_available, running_app, wait_idle  # noqa: E402
from ui.tour import load_tour, resolve  # noqa: E402
from ui.warmup import warm_tour  # noqa: E402

DEMO = ROOT / "data" / "demo"
BUNDLE = DEMO / "workspace.palbundle"
TARGET_S = 5.0


def _open(page, url: str) -> float:
    start = time.perf_counter()
    page.goto(url, timeout=300_000)
    page.locator("[data-testid='stApp'][data-test-script-state='running']").wait_for(timeout=10_000)
    wait_idle(page, timeout_ms=300_000)
    page.locator("[data-testid='stSpinner']").wait_for(state="detached", timeout=300_000)
    return time.perf_counter() - start


SETTLE_S = float(os.environ.get("PAL_BENCH_SETTLE_S", "0"))  # seconds between the app's start and the first view


def main(wanted: list[int]) -> None:
    if not (chromium_available() and BUNDLE.is_file()):
        print("needs Debian chromium and data/demo/workspace.palbundle")
        return
    home = Path(tempfile.mkdtemp(prefix="pal-cold-")) / "pal"
    ws = Workspace(home=home, config=load_config(secrets={}, env={}))
    t0 = time.perf_counter()
    import_once(ws, BUNDLE, known=configured_datasets())
    print(f"demo workspace imported in {time.perf_counter() - t0:.1f} s (once, before timing)")
    t0 = time.perf_counter()
    warmed = warm_tour(ws, DEMO)  # what the app's first start does in the background (ui.warmup)
    print(f"tour warmed in {time.perf_counter() - t0:.1f} s: {'; '.join(warmed)}")
    dataset = load_dataset(DEMO)
    stops, _ = load_tour(dataset)
    env = {"PAL_HOME": str(home), "PAL_DEMO_WORKSPACE": str(BUNDLE)}
    for n, stop in enumerate(stops, start=1):
        if wanted and n not in wanted:
            continue
        r = resolve(stop, dataset, ws)
        path = r.page
        with running_app(env=env, timeout=180) as url, browser_page(width=1400, height=1600) as page:
            link = f"{url}/{path}?{urlencode(r.params)}"
            time.sleep(SETTLE_S)
            cold = _open(page, link)
            warm = _open(page, link)
        flag = "ok" if cold <= TARGET_S else "OVER"
        print(f"stop {n:2d} {stop.title[:44]:44s} cold {cold:6.1f} s  warm {warm:5.1f} s  {flag}  "
              f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]])
