"""``make bench``'s document: a bench's section is its printout, kept when another bench runs, and a printout of a
bench run on its own (hours on the bundled model) can be recorded as that bench's section."""

from __future__ import annotations

import importlib.util
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


def test_a_recorded_printout_must_name_a_bench_and_a_file(tmp_path, monkeypatch, capsys):
    report = load_report(tmp_path, monkeypatch)
    assert report.main(["--recorded", f"no_such_bench={tmp_path}"]) == 2
    assert report.main(["--recorded", "stance_corpus=/nonexistent/file"]) == 2
    assert "expected NAME=FILE" in capsys.readouterr().err and not report.OUT.exists()
