"""Cold and warm page times of the tour's stops on the demo workspace, in headless Chromium (target: cold ≤ 5 s).

For each stop (``data/demo/tour.json``, resolved as the home page's tour links are), a fresh app is started over
a home that already holds the demo workspace (imported and its tour warmed once before timing, as ``make run`` does
on first start),
the stop's URL is opened, and the time from navigation to the page's script being idle with no spinner is the cold
figure; the same URL opened again in the same app is the warm figure. Prints one line per stop and the load
average beside them. ``PAL_BENCH_SETTLE_S`` waits that long between the app's start and the first view (a presenter
starts the app before the tour; its background warm-up, :mod:`ui.warmup`, then has loaded the embedder).
``--after-home`` times what a presenter sees: ``make run`` opens the home page, where the tour starts, which
starts the app's warm-up (:func:`ui.warmup.start_demo_warmup`, once per process); the stop is opened once the
warm-up's last line is in the app's log (its embedder loaded, in the same process as the page), so the cold figure
is the stop's own first view, not the process's first import of the embedding model. Without it, the stop is the
app's very first view: every vector it shows was embedded by the warm-up before and kept in the home's embedding cache
(:mod:`backends.store.embed_cache`), so the app should load no embedding model; each line says whether it did (the
app's "loading embedder" log lines while the stop was open). Before it answers, the server imports the tour's pages,
opens the workspace, computes what the stops show from the stored records and starts the warm-up in the background
(``serve.py``, :func:`ui.warmup.warm_demo_at_start`): that time is in "app+browser start", not in the cold figure.
Each cold figure says how much of it went by before the stop's script ran ("shell": the browser loading the app
and connecting, the same for every page). ``--repeat N`` opens each stop in N fresh apps and adds a line with the median and the minimum of the cold figures
(the machine is shared: one figure says little). Run:
``.venv/bin/python bench/cold_pages.py [--after-home] [--repeat N] [stop numbers…]``.
"""

from __future__ import annotations

import os
import statistics
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
from ui.warmup import FINISHED, warm_tour  # noqa: E402

DEMO = ROOT / "data" / "demo"
BUNDLE = DEMO / "workspace.palbundle"
TARGET_S = 5.0


def _open(page, url: str) -> tuple[float, float]:
    """Seconds from navigation to the page's script idle with no spinner, and of them the seconds until its script
    ran (the browser has loaded the app's shell and connected: what no page's own work changes)."""
    start = time.perf_counter()
    page.goto(url, timeout=300_000)
    page.locator("[data-testid='stApp'][data-test-script-state='running']").wait_for(timeout=10_000)
    shell = time.perf_counter() - start
    wait_idle(page, timeout_ms=300_000)
    page.locator("[data-testid='stSpinner']").wait_for(state="detached", timeout=300_000)
    return time.perf_counter() - start, shell


SETTLE_S = float(os.environ.get("PAL_BENCH_SETTLE_S", "0"))  # seconds between the app's start and the first view


def _after_home(page, url: str, home: Path, seen: int, timeout_s: float = 600.0) -> float:
    """Open the home page and wait for the app's warm-up to log its last line (``seen``: how many such lines the log
    held before the app started; the server starts its warm-up before it answers); seconds waited."""
    start = time.perf_counter()
    log = home / "logs" / "pal.log"
    _open(page, url)
    while time.perf_counter() - start < timeout_s:
        if log.is_file() and log.read_text(encoding="utf-8", errors="replace").count(FINISHED) > seen:
            break
        time.sleep(1.0)
    return time.perf_counter() - start


LOADING = "loading embedder"  # the workspace's log line when a model loads (studio.workspace.Workspace.embedder)


def _log_count(home: Path, line: str) -> int:
    log = home / "logs" / "pal.log"
    return log.read_text(encoding="utf-8", errors="replace").count(line) if log.is_file() else 0


def main(wanted: list[int], after_home: bool = False, repeat: int = 1) -> None:
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
        link_path = f"{r.page}?{urlencode(r.params)}"
        colds = [_time_stop(n, stop.title, link_path, home, env, after_home) for _ in range(repeat)]
        if repeat > 1:
            print(f"stop {n:2d} {stop.title[:44]:44s} cold median {statistics.median(colds):5.1f} s  "
                  f"min {min(colds):5.1f} s  over {repeat} fresh apps  "
                  f"{'ok' if statistics.median(colds) <= TARGET_S else 'OVER'}  load {_loadavg()}")


def _loadavg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _time_stop(n: int, title: str, link_path: str, home: Path, env: dict[str, str], after_home: bool) -> float:
    """One fresh app: the stop's cold and warm figures printed on one line; the cold figure."""
    loads, finished = _log_count(home, LOADING), _log_count(home, FINISHED)
    began = time.perf_counter()
    with running_app(env=env, timeout=180) as url, browser_page(width=1400, height=1600) as page:
        started = time.perf_counter() - began  # the server's start (it readies the tour first) and the browser's
        time.sleep(SETTLE_S)
        waited = _after_home(page, url, home, finished) if after_home else None
        cold, shell = _open(page, f"{url}/{link_path}")
        warm, _ = _open(page, f"{url}/{link_path}")
        loaded = _log_count(home, LOADING) - loads
    flag = "ok" if cold <= TARGET_S else "OVER"
    before = "" if waited is None else f"  (home + warm-up {waited:5.1f} s before)"
    print(f"stop {n:2d} {title[:44]:44s} cold {cold:6.1f} s (shell {shell:4.1f} s)  warm {warm:5.1f} s  {flag}  "
          f"load {_loadavg()}  models loaded {loaded}  app+browser start {started:5.1f} s{before}", flush=True)
    return cold


def _repeat(argv: list[str]) -> int:
    """``--repeat N`` (default 1)."""
    return int(argv[argv.index("--repeat") + 1]) if "--repeat" in argv else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    times = _repeat(args)
    main([int(a) for i, a in enumerate(args) if a.isdigit() and (i == 0 or args[i - 1] != "--repeat")],
         after_home="--after-home" in args, repeat=times)
