"""Run every bench script and write ``docs/performance.md``: each bench's printout with the machine, the date, the
commit and the load average before and after it (``make bench`` calls this).

A bench prints its own figures and checks its own targets; this script only runs them one after another and keeps
what they printed, so the document is always the last measurement and never hand-edited. ``--only NAME,NAME``
runs some benches and keeps the others' last printouts from the existing document.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import os
import platform
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "performance.md"
BENCH = ROOT / "bench"
SECTION = re.compile(r"^## `bench/(?P<name>[\w]+)\.py`\n(?P<body>.*?)(?=^## `bench/|\Z)", re.M | re.S)


# progress bars are not figures; unbuffered output keeps what a bench stopped at its timeout had printed
BENCH_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "PYTHONUNBUFFERED": "1"}


def bench_scripts() -> list[Path]:
    return sorted(p for p in BENCH.glob("*.py") if p.name != "__init__.py")


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def machine() -> str:
    """Cores, memory and processor of this machine, in one line."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    mem = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kib = int(meminfo.read_text().split()[1])
        mem = f", {kib / 1024 ** 2:.0f} GiB"
    return f"{os.cpu_count()} cores{mem}, {cpu}, Python {platform.python_version()}"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no git commit: {e}", file=sys.stderr)
        return "unknown"


def run_printout(cmd: list[str], timeout: float) -> tuple[str, str]:
    """What ``cmd`` printed (stdout and stderr as they came) and its exit code, or "stopped after N s": a bench past
    ``timeout`` is stopped with every process it started (servers, workers: its own process group), and what it had
    printed is kept."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **BENCH_ENV}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return out.decode(errors="replace"), str(proc.returncode)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return out.decode(errors="replace"), f"stopped after {timeout:.0f} s"


def run_bench(script: Path, timeout: float) -> str:
    """One bench's section: when, on what load, how long, its exit code and everything it printed."""
    before, started = load_average(), time.monotonic()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    printed, code = run_printout([sys.executable, str(script)], timeout)
    took = time.monotonic() - started
    print(f"{script.name}: exit {code} in {took:.0f} s", file=sys.stderr)
    return (f"## `bench/{script.name}`\n\n{stamp} · commit {commit()} · {took:.0f} s · exit {code} · load average "
            f"{before} before, {load_average()} after\n\n```text\n{printed.rstrip()}\n```\n\n")


# the exit code a printout of a bench run on its own ends with (``exit 124``: stopped by ``timeout``)
EXIT_LINE = re.compile(r"^exit (\d+)\s*$", re.MULTILINE)


def recorded_section(name: str, log: Path) -> str:
    """A bench's section from the printout of a run made outside ``make bench`` (a bench of an hour or more on the
    bundled model, run on its own): the printout as it was, dated by the file, the load as the bench printed it."""
    stamp = dt.datetime.fromtimestamp(log.stat().st_mtime, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    printed = log.read_text(encoding="utf-8", errors="replace")
    codes = EXIT_LINE.findall(printed)
    code = f"exit {codes[-1]}" if codes else "exit code not in the printout"
    return (f"## `bench/{name}.py`\n\n{stamp} · commit {commit()} · run on its own, its printout recorded from "
            f"`{log.name}` · {code} · load average as the bench printed it\n\n```text\n{printed.rstrip()}\n```\n\n")


def previous_sections() -> dict[str, str]:
    if not OUT.exists():
        return {}
    return {m["name"]: m.group(0) for m in SECTION.finditer(OUT.read_text(encoding="utf-8"))}


def purpose(script: Path) -> str:
    """The first sentence of a bench's module docstring: what it measures."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    sentence = first.split(". ")[0].rstrip(".") if first else "(no docstring)"
    return sentence if len(sentence) <= 200 else sentence[:199].rsplit(" ", 1)[0] + " …"


def render(sections: dict[str, str]) -> str:
    head = ["# Performance", "",
            "Generated by `make bench` (`scripts/performance_report.py`): every script in `bench/` run one after another,",
            "each with what it printed, when, on which commit and at which load average (1, 5 and 15 minutes). Do not",
            "edit by hand. Compare figures only within one section or between sections at a similar load: on a busy",
            "2-core machine the local model decodes several times slower.", "",
            f"Machine: {machine()}.", "", "| bench | what it measures |", "|---|---|",
            *[f"| `bench/{p.name}` | {purpose(p)} |" for p in bench_scripts()], ""]
    missing = [p.stem for p in bench_scripts() if p.stem not in sections]
    if missing:
        head += [f"Not measured yet: {', '.join(f'`bench/{m}.py`' for m in missing)}.", ""]
    return "\n".join(head) + "\n" + "".join(sections[p.stem] for p in bench_scripts() if p.stem in sections)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated bench names (without .py); the rest keep their last "
                                               "printout")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds one bench may run")
    ap.add_argument("--recorded", action="append", default=[], metavar="NAME=FILE",
                    help="keep the printout in FILE of bench NAME run on its own (an hours-long bench); runs no bench "
                         "unless --only names some")
    args = ap.parse_args(argv)
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    sections = previous_sections()
    failed = False
    known = {p.stem for p in bench_scripts()}
    for item in args.recorded:
        name, _, path = item.partition("=")
        if name not in known or not Path(path).is_file():
            print(f"error: --recorded {item}: expected NAME=FILE with NAME one of bench/*.py and FILE a printout",
                  file=sys.stderr)
            return 2
        sections[name] = recorded_section(name, Path(path))
    if args.recorded and not only:
        OUT.write_text(render(sections), encoding="utf-8")
        print(f"wrote {OUT}")
        return 0
    for script in bench_scripts():
        if only and script.stem not in only:
            continue
        sections[script.stem] = run_bench(script, args.timeout)
        failed = failed or "· exit 0 ·" not in sections[script.stem]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(render(sections), encoding="utf-8")
    print(f"wrote {OUT}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
