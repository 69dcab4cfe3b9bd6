"""Workspace bundles: file size, export time and import time (into an empty home, then again: nothing added).

Two workspaces: the bundled demo workspace (``data/demo/workspace.palbundle``: imported, then exported again) and
a PAL-Set-scale fixture — 100 filler users of ``testkit.release`` (29 sessions, 35 logs and 14 turns each) with
three memory methods built for every user, one simulated topic per user per method and its FairEval judgments
(scripted LLMs, hash embedder). Run: ``.venv/bin/python bench/bundle_figures.py [--users 100] [--sessions 29]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from palset.loader import load_dataset
from palset.names import DEMO_PATH, configured_datasets
from studio.bundle.export import export_bundle
from studio.bundle.importer import import_bundle
from testkit.release import make_release
from testkit.worked import fill_home
from testkit.workspace import make_workspace

DEMO_BUNDLE = DEMO_PATH / "workspace.palbundle"
ENV = {"PAL_EMBEDDER": "hash"}  # the fixture's builds and the import targets (the demo's builds keep their own)


def rows(manifest) -> int:
    return sum(manifest.counts.values())


def round_trip(label: str, ws, dataset, out: Path, known: dict[str, Path], scratch: Path) -> None:
    started = time.perf_counter()
    manifest = export_bundle(ws, dataset, out)
    export_s = time.perf_counter() - started
    target = make_workspace(scratch / f"{label}-target", env=ENV)
    started = time.perf_counter()
    first = import_bundle(target, out, known=known)
    import_s = time.perf_counter() - started
    started = time.perf_counter()
    again = import_bundle(target, out, known=known)
    again_s = time.perf_counter() - started
    print(f"{label:<28} {out.stat().st_size / 1e6:>8.2f} MB {rows(manifest):>9} rows  export {export_s:>6.1f} s  "
          f"import {import_s:>6.1f} s ({first.total_added} rows)  again {again_s:>5.1f} s ({again.total_added} added)")
    print("  rows per table: " + ", ".join(f"{t} {n}" for t, n in manifest.counts.items() if n))


def demo(scratch: Path) -> None:
    if not DEMO_BUNDLE.is_file():
        print(f"{DEMO_BUNDLE} is missing: make demo-workspace")
        return
    home = make_workspace(scratch / "demo-home", env=ENV)
    started = time.perf_counter()
    import_bundle(home, DEMO_BUNDLE, known=configured_datasets())
    print(f"demo workspace bundle: {DEMO_BUNDLE.stat().st_size / 1e6:.2f} MB; first import "
          f"{time.perf_counter() - started:.1f} s")
    round_trip("demo workspace (re-export)", home, load_dataset(DEMO_PATH), scratch / "demo.palbundle",
               configured_datasets(), scratch)


def palset_scale(scratch: Path, users: int, sessions: int) -> None:
    root = make_release(scratch / "palset-scale", users=users, sessions=sessions, logs_per_session=35, turns=14,
                        query_sessions=2)
    dataset = load_dataset(root)
    ws = make_workspace(scratch / "scale-home", env=ENV)
    started = time.perf_counter()
    tasks = [u.query[0].task_id(u.query[0].topics[0].key) for u in dataset.users.values()]
    made = fill_home(ws, dataset, list(dataset.users), ("gold", "vanilla-log", "rag-turn"), task_ids=tasks,
                     review=False, fidelity=False)
    print(f"PAL-Set-scale fixture: {users} users × {sessions} sessions, {made['builds']} builds, {made['runs']} runs, "
          f"{made['judgments']} judgments made in {time.perf_counter() - started:.0f} s")
    round_trip(f"{users} users × 3 methods", ws, dataset, scratch / "scale.palbundle", {"palset-scale": root}, scratch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--sessions", type=int, default=29)
    parser.add_argument("--skip-scale", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        demo(scratch)
        if not args.skip_scale:
            palset_scale(scratch, args.users, args.sessions)


if __name__ == "__main__":
    main()
