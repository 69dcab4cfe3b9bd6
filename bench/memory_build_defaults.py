"""LLM memory builds of a demo user on the defaults, as a new user starts one: minutes, calls, timeouts, finished or not.

For each ``METHOD:USER`` asked, in a fresh ``PAL_HOME`` and with no role configured through the environment, this runs
what the Memory page's Build button runs (the same job, from the CLI)::

    pal memory build --dataset data/demo --user USER --method METHOD [--until SESSION]

and prints the wall minutes, the sessions and stages done, the LLM calls the build recorded (errors and timeouts
among them), the tokens, the longest call, seconds per session and the bundled server's measured speed the deadlines
came from. A build that stopped is run once more (the page's "Resume"; finished stages are kept) and both runs are
counted.

    .venv/bin/python bench/memory_build_defaults.py                              # memorybank and h2memory of 1006
    .venv/bin/python bench/memory_build_defaults.py --builds memorybank:1000 --until 2 --keep /tmp/mb
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.generation_defaults import PAL, call_figures, clean_env, print_calls, run, work_folder  # noqa: E402

DEMO = ROOT / "data" / "demo"


def _session_ids(user: str, until: int | None) -> list[str]:
    """The demo user's session ids, the first ``until`` of them when given."""
    from palset.loader import load_dataset

    sessions = [s.sample_id for s in load_dataset(DEMO).users[user].sessions]
    return sessions[:until] if until else sessions


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def _summary(log: Path) -> dict[str, Any] | None:
    """The JSON line ``pal memory build`` prints when it finished (None when it did not)."""
    for line in reversed(log.read_text(encoding="utf-8").splitlines()):
        if line.startswith("{") and '"build_id"' in line:
            return json.loads(line)
    return None


def one_build(method: str, user: str, until: int | None, base: Path) -> None:
    home, log = base / f"home-{method}-{user}", base / f"{method}-{user}.log"
    env = clean_env(home)
    sessions = _session_ids(user, until)
    print(f"\n== {method} of demo user {user}, {len(sessions)} sessions (load average before: {load_average()})", flush=True)
    cmd = [str(PAL), "memory", "build", "--dataset", str(DEMO), "--user", user, "--method", method]
    if until:
        cmd += ["--until", sessions[-1]]
    log.write_text("", encoding="utf-8")
    code, seconds = run(cmd, env, log)
    tries = 1
    if code != 0:
        print(f"   build exited {code} after {seconds / 60:.1f} min; resuming once", flush=True)
        code, more = run(cmd, env, log)
        seconds, tries = seconds + more, 2
    figures, summary = call_figures(home), _summary(log)
    print(f"   build: exit {code} in {seconds / 60:.1f} min ({tries} run{'s' if tries > 1 else ''}; "
          f"load average after: {load_average()})")
    if summary:
        per_session = float(summary["seconds"]) / max(int(summary["sessions_done"]), 1)
        print(f"   {summary['sessions_done']} sessions, {summary['stages_done']} stages; "
              f"{per_session:.0f} s per session of build time")
    print_calls(figures)
    if figures["last_error"]:
        print(f"   last call error: {str(figures['last_error'])[:300]}")
    print(f"   output and logs: {log}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--builds", default="memorybank:1006,h2memory:1006", help="METHOD:USER, comma-separated")
    parser.add_argument("--until", type=int, help="build only the first N sessions of each user")
    parser.add_argument("--keep", type=Path, help="folder for the homes and logs (default: a temporary one)")
    args = parser.parse_args()
    base = work_folder(args.keep, "build-defaults-", "memory builds")
    for item in args.builds.split(","):
        method, _, user = item.strip().partition(":")
        one_build(method, user or "1006", args.until, base)


if __name__ == "__main__":
    main()
