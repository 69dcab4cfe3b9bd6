"""Dataset load time at PAL-Set scale, and Users-page render time for a 1,000-log user.

Targets (foundation issue): load ≤ 3 s for 100 users × ~29 sessions × ~35 logs × ~14 turns;
rendering a 1,000-log user ≤ 2× an empty page. Run: ``.venv/bin/python bench/dataset_load.py``.
Render times are server-side script times measured with Streamlit's AppTest (median of N runs).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from palset.assemble import write_release  # noqa: E402
from palset.loader import load_dataset  # noqa: E402
from testkit.release import make_bundle, make_release  # noqa: E402


def bench_load(root: Path, repeats: int) -> None:
    t0 = time.perf_counter()
    make_release(root, users=100, sessions=29, logs_per_session=35, turns=14, topics=2, query_sessions=3)
    gen = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in root.rglob("*.json")) / 1e6
    times, lazy_times, one_user = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        lazy = load_dataset(root, lazy=True)
        lazy_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        lazy.users["0042"].sessions  # noqa: B018 - what opening one user costs
        one_user.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ds = load_dataset(root)
        times.append(time.perf_counter() - t0)
    sessions = sum(len(u.sessions) for u in ds.users.values())
    logs = sum(u.log_count for u in ds.users.values())
    turns = sum(len(s.turns) for u in ds.users.values() for s in u.sessions)
    print(f"fixture: {len(ds.users)} users, {sessions} sessions, {logs} logs, {turns} turns, {size:.1f} MB "
          f"(generated in {gen:.1f} s); errors: {len(ds.errors)}")
    print(f"dataset load as the app does it (sessions built per user on first view): median "
          f"{statistics.median(lazy_times):.2f} s, min {min(lazy_times):.2f} s over {repeats} runs (target <= 3 s)")
    print(f"  + building one user's {lazy.users['0042'].log_count} logs and sessions on first view: median "
          f"{statistics.median(one_user) * 1000:.0f} ms")
    print(f"full load and validation of every session (pal validate / pal stats): median "
          f"{statistics.median(times):.2f} s, min {min(times):.2f} s")


def _render_time(dataset: str, params: dict[str, str], repeats: int) -> float:
    from streamlit.testing.v1 import AppTest

    times = []
    for i in range(repeats + 1):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.switch_page("pages/users.py")
        at.query_params["dataset"] = dataset
        for k, v in params.items():
            at.query_params[k] = v
        t0 = time.perf_counter()
        at.run()
        elapsed = time.perf_counter() - t0
        assert not at.exception, [e.value for e in at.exception]
        if i:  # the first run warms the dataset cache and imports
            times.append(elapsed)
    return statistics.median(times)


def bench_render(root: Path, repeats: int) -> None:
    big = make_bundle("0001", sessions=29, logs_per_session=35, turns=14, topics=2, query_sessions=3)
    empty = make_bundle("0000", sessions=1, logs_per_session=2, turns=4, topics=1, query_sessions=0)
    empty.situations = []
    write_release(root, [empty, big])
    os.environ["PAL_DATASETS"] = f"bench={root}"
    logs = load_dataset(root).users["0001"].log_count
    base = _render_time("bench", {"user": "0000"}, repeats)
    print(f"users page, empty user (profile only): {base * 1000:.0f} ms")
    for tab in ("Profile", "Timeline", "Logs", "Sessions"):
        t = _render_time("bench", {"user": "0001", "tab": tab}, repeats)
        print(f"users page, {logs}-log user, tab {tab:<8}: {t * 1000:.0f} ms = {t / base:.2f}x empty (target <= 2x)")
    gallery = _render_time("bench", {}, repeats)
    print(f"users page, gallery: {gallery * 1000:.0f} ms")


def main() -> None:
    # Streamlit warns, once per cached call made outside a browser session, that it runs "in bare mode": 36 lines of
    # noise in the printout that docs/performance.md keeps. A filter, not a level: Streamlit sets its loggers' levels
    # again when it reads its config. Added once, not per page render.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        lambda record: "missing ScriptRunContext" not in record.getMessage())
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_load(Path(tmp) / "palset-scale", args.repeats)
        bench_render(Path(tmp) / "render", args.repeats)


if __name__ == "__main__":
    main()
