"""`pal experiment plan | run | report` on the example file, every role answered by the scripted protocol LLM."""

from __future__ import annotations

import json

import pytest

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from cli import context
from cli.main import main
from testkit.protocol_fake import protocol_reply
from testkit.workspace import make_workspace
from tests.conftest import ROOT

FILE = str(ROOT / "experiments" / "demo-small.toml")


@pytest.fixture
def ws(tmp_path, monkeypatch):
    ws = make_workspace(tmp_path / "pal", dict.fromkeys(ROLES, ScriptedLLM(protocol_reply)), env={"PAL_EMBEDDER": "hash"})
    monkeypatch.setattr(context, "open_workspace", lambda: ws)
    yield ws
    ws.jobs.stop()


def test_plan_run_and_report(ws, capsys, tmp_path):
    assert main(["experiment", "plan", FILE]) == 0
    out = capsys.readouterr().out
    assert "experiment demo-small: 40 units (0 already done)" in out and "faireval" in out and "total:" in out
    assert "time: endpoint-bound:" in out and "time: app-bound:" in out and "assumed (plan_rates.toml)" in out
    assert main(["experiment", "report", FILE]) == 2 and "has not run yet" in capsys.readouterr().err

    assert main(["experiment", "run", FILE]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["done"] == 40
    assert "100.0%" in captured.err and "[40/40]" in captured.err  # the progress bar reached the end
    assert main(["experiment", "run", FILE]) == 0  # re-running: nothing left, nothing redone
    assert "[40/40]" in capsys.readouterr().err

    assert main(["experiment", "report", FILE]) == 0
    md = capsys.readouterr().out
    assert "| vanilla-log | vanilla | requirement | 0 | 4 | 0 | 0.500 [0.500, 0.500] | 0 | 0/8 | 0 |" in md
    assert main(["experiment", "report", FILE, "--format", "latex", "--out", str(tmp_path / "t.tex")]) == 0
    assert r"\begin{tabular}" in (tmp_path / "t.tex").read_text()
    assert main(["experiment", "plan", FILE]) == 0
    out = capsys.readouterr().out
    assert "(40 already done)" in out and "CPU per call, measured from this home's job runs" in out


def test_a_wrong_file_is_exit_2_naming_the_field(ws, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(open(FILE).read().replace("k = 1", "k = 1\nsamples = 3"), encoding="utf-8")
    for args, message in ((["plan", str(bad)], "samples: unknown field"),
                          (["run", str(tmp_path / "missing.toml")], "cannot read")):
        with pytest.raises(SystemExit) as e:  # `pal` exits 2
            main(["experiment", *args])
        assert e.value.code == 2 and message in capsys.readouterr().err
