"""``make bench``'s document: a bench's section is its printout, kept when another bench runs, and a printout of a
bench run on its own (hours on the bundled model) can be recorded as that bench's section."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_report(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("performance_report", ROOT / "scripts" / "performance_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]  # the spec of an existing file has a loader
    monkeypatch.setattr(module, "OUT", tmp_path / "performance.md")
    return module


def test_a_recorded_printout_becomes_its_benchs_section_and_survives_the_next_write(tmp_path, monkeypatch):
    report = load_report(tmp_path, monkeypatch)
    log = tmp_path / "gen.out"
    log.write_text("== zh: pal generate\n   generate: exit 0 in 80.0 min\n", encoding="utf-8")
    assert report.main(["--recorded", f"generation_defaults={log}"]) == 0
    text = report.OUT.read_text(encoding="utf-8")
    assert "## `bench/generation_defaults.py`" in text and "generate: exit 0 in 80.0 min" in text
    assert "`bench/generation_defaults.py`" not in text.split("Not measured yet:")[1].split("\n")[0]
    sections = report.previous_sections()
    assert "exit 0 in 80.0 min" in sections["generation_defaults"]
    log.write_text("other\n", encoding="utf-8")
    assert report.main(["--recorded", f"stance_corpus={log}"]) == 0  # another bench: the first section stays
    assert "exit 0 in 80.0 min" in report.OUT.read_text(encoding="utf-8")


def test_a_recorded_printout_says_the_exit_code_it_ends_with(tmp_path, monkeypatch):
    report = load_report(tmp_path, monkeypatch)
    log = tmp_path / "throughput.txt"
    log.write_text("== bundled\n  build: wall 2185.2 s\nexit 124\nload average after: 1.15 1.33 1.88\n", encoding="utf-8")
    assert report.main(["--recorded", f"model_throughput={log}"]) == 0
    header = report.previous_sections()["model_throughput"].split("\n")[2]
    assert "· exit 124 ·" in header and "exit 0" not in header
    log.write_text("figures only\n", encoding="utf-8")
    assert report.main(["--recorded", f"model_throughput={log}"]) == 0
    assert "· exit code not in the printout ·" in report.previous_sections()["model_throughput"]


def test_a_recorded_printout_must_name_a_bench_and_a_file(tmp_path, monkeypatch, capsys):
    report = load_report(tmp_path, monkeypatch)
    assert report.main(["--recorded", f"no_such_bench={tmp_path}"]) == 2
    assert report.main(["--recorded", "stance_corpus=/nonexistent/file"]) == 2
    assert "expected NAME=FILE" in capsys.readouterr().err and not report.OUT.exists()


def test_a_bench_past_its_timeout_is_stopped_with_what_it_started_and_its_printout_kept(tmp_path, monkeypatch):
    report = load_report(tmp_path, monkeypatch)
    pid_file = tmp_path / "child.pid"
    bench = (f"import subprocess, sys, time\n"
             f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
             f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
             f"print('first figure', flush=True)\n"
             f"time.sleep(60)\n")
    printed, code = report.run_printout([sys.executable, "-c", bench], timeout=3)
    assert "first figure" in printed and code == "stopped after 3 s"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists() and "Z" not in _state(child):
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child)  # the server it started is gone too
    assert report.run_printout([sys.executable, "-c", "print('done')"], timeout=30) == ("done\n", "0")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "gone"
