"""The demo recording's plan (what the issue asks the bundled workspace to hold) and its resumable ledger."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("record_demo", ROOT / "scripts" / "record_demo.py")
record_demo = importlib.util.module_from_spec(spec)
sys.modules["record_demo"] = record_demo
spec.loader.exec_module(record_demo)


def _commands(plan):
    return [c for stage in plan for c in stage.commands]


def _flag(command, name):
    return command[command.index(name) + 1]


def test_the_plan_holds_what_the_demo_workspace_must_show():
    plan = record_demo.build_plan()
    commands = _commands(plan)
    built = {_flag(c, "--users") for c in commands if c[:2] == ["memory", "fidelity"] and _flag(c, "--method") == "h2memory"}
    assert {"1006", "1007"} <= built and len(built) >= 3  # H²Memory of three users, both Chinese ones among them
    simulated: dict[str, set[str]] = {}
    for c in commands:
        if c[0] == "simulate" and "--task-ids" in c:
            for task in _flag(c, "--task-ids").split(","):
                simulated.setdefault(task, set()).update(_flag(c, "--methods").split(","))
    for user in record_demo.USERS:
        topics = [t for t in simulated if t.startswith(user + "_")]
        assert len(topics) >= 2, user
        for t in topics:
            assert {"gold", "rag-turn", "vanilla-log"} <= simulated[t]
            assert ("h2memory" in simulated[t]) == (user in built)
    judged = {frozenset((_flag(c, "--runs"), _flag(c, "--baseline"))) for c in commands if c[0] == "judge"}
    methods = ["gold", "rag-turn", "vanilla-log", "h2memory"]
    assert {frozenset((a, b)) for i, a in enumerate(methods) for b in methods[i + 1:]} <= judged
    assert {_flag(c, "--k") for c in commands if c[0] == "judge"} == {"3"}


def test_the_tour_comes_first():
    names = [s.name for s in record_demo.build_plan()]
    assert names[:3] == ["memories", "tour-dialogues", "tour-verdicts"]
    tour = record_demo.build_plan()[1].commands[0]
    assert "1002_sample7_topic-1" in _flag(tour, "--task-ids")  # the tour's stop 11 (data/demo/tour.json)


@pytest.fixture
def calls(monkeypatch):
    made: list[list[str]] = []
    codes: dict[str, int] = {}

    def call(command, cwd, env):
        made.append(command)
        return next((code for word, code in codes.items() if word in command), 0)

    monkeypatch.setattr(record_demo.subprocess, "call", call)
    return made, codes


def test_a_rerun_skips_finished_stages_and_retries_a_failed_one(tmp_path, calls):
    made, codes = calls
    codes["judge"] = 3  # every judgment fails this time
    codes["h2memory"] = 4  # and every H²Memory build
    assert record_demo.main(["--home", str(tmp_path), "--out", str(tmp_path / "w.palbundle")]) == 1
    ledger = json.loads((tmp_path / "recording.json").read_text())
    assert ledger["stages"]["memories"]["status"] == "done"
    assert ledger["stages"]["tour-verdicts"]["status"].startswith("failed (exit 3)")
    export = made[-1]
    assert export[3:5] == ["workspace", "export"]
    hows = [export[i + 1] for i, word in enumerate(export) if word == "--how"]
    assert any(h.startswith("not yet recorded: tour-verdicts") for h in hows)
    assert "h2memory" not in export[export.index("--methods") + 1]  # no H²Memory stage finished: none exported
    made.clear()
    codes.clear()
    assert record_demo.main(["--home", str(tmp_path), "--out", str(tmp_path / "w.palbundle")]) == 0
    assert not any(c[3:5] == ["memory", "fidelity"] and "gold" in c for c in made)  # done before: not asked again
    assert any(c[3] == "judge" for c in made)  # the failed stage runs again
    hows = [made[-1][i + 1] for i, word in enumerate(made[-1]) if word == "--how"]
    assert not any(h.startswith("not yet recorded") for h in hows)
    assert "h2memory" in made[-1][made[-1].index("--methods") + 1]


def test_minutes_stops_starting_stages_and_still_exports(tmp_path, calls):
    made, _ = calls
    assert record_demo.main(["--home", str(tmp_path), "--out", str(tmp_path / "w.palbundle"), "--minutes", "0"]) == 0
    assert [c[3:5] for c in made] == [["workspace", "export"]]  # no stage started: what is recorded is exported


def _during(monkeypatch, made: list, command: list[str], action) -> None:
    """Commands are recorded and succeed; ``action`` runs when ``command`` is the one called."""
    def call(cmd, cwd, env):
        made.append(cmd)
        if cmd[3:] == command:
            action()
        return 0

    monkeypatch.setattr(record_demo.subprocess, "call", call)


def test_a_stop_file_ends_the_recording_after_the_stage_under_way(tmp_path, calls, monkeypatch):
    made, _ = calls
    home = tmp_path / "h"
    plan = record_demo.build_plan()

    _during(monkeypatch, made, plan[1].commands[0], lambda: (home / "STOP").write_text(""))
    assert record_demo.main(["--home", str(home), "--out", str(tmp_path / "w.palbundle")]) == 0
    assert [c[3:] for c in made[:-1]] == [*plan[0].commands, *plan[1].commands]  # that stage finished, no other began
    assert made[-1][3:5] == ["workspace", "export"] and not (home / "STOP").exists()  # the next run goes on
    ledger = json.loads((home / "recording.json").read_text())
    assert [n for n, e in ledger["stages"].items() if e["status"] == "done"] == [plan[0].name, plan[1].name]


def test_ctrl_c_keeps_the_time_spent_exports_and_the_stage_resumes_next_time(tmp_path, calls, monkeypatch):
    made, _ = calls
    home = tmp_path / "h"
    plan = record_demo.build_plan()

    def ctrl_c() -> None:
        record_demo.time.sleep(0.05)
        raise KeyboardInterrupt

    _during(monkeypatch, made, plan[1].commands[0], ctrl_c)
    assert record_demo.main(["--home", str(home), "--out", str(tmp_path / "w.palbundle")]) == 130
    assert made[-1][3:5] == ["workspace", "export"]  # what was recorded is exported all the same
    hows = [made[-1][i + 1] for i, word in enumerate(made[-1]) if word == "--how"]
    assert hows[-1].startswith(f"not yet recorded: {plan[1].name},")
    entry = json.loads((home / "recording.json").read_text())["stages"][plan[1].name]
    assert entry["status"].startswith("interrupted: pal simulate") and entry["seconds"] >= 0.05
    made.clear()
    monkeypatch.setattr(record_demo.subprocess, "call", lambda command, cwd, env: made.append(command) or 0)
    assert record_demo.main(["--home", str(home), "--out", str(tmp_path / "w.palbundle"), "--minutes", "0.001"]) == 0
    assert made[0][3:] == plan[1].commands[0]  # the interrupted stage runs again first


def test_an_unfinished_build_is_left_out_of_the_export_but_kept_in_the_recording(tmp_path):
    import sqlite3

    home = tmp_path / "rec"
    home.mkdir()
    con = sqlite3.connect(home / "runs.sqlite")
    con.execute("CREATE TABLE memory_builds (build_id TEXT PRIMARY KEY, method TEXT, user_id TEXT)")
    con.executemany("INSERT INTO memory_builds VALUES (?, ?, ?)",
                    [("a", "h2memory", "1002"), ("b", "h2memory", "1006"), ("c", "gold", "1006")])
    con.commit()
    con.close()
    copy = record_demo.without_builds(home, tmp_path / "copy", "h2memory", ["1006"])
    rows = sqlite3.connect(copy / "runs.sqlite").execute("SELECT build_id FROM memory_builds ORDER BY 1").fetchall()
    assert rows == [("a",), ("c",)]
    assert len(sqlite3.connect(home / "runs.sqlite").execute("SELECT * FROM memory_builds").fetchall()) == 3


def _bundle(path, how):
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("manifest.json", json.dumps({"how": how}))
    return path


def test_a_fresh_home_continues_the_recording_the_bundle_holds(tmp_path, calls):
    made, _ = calls
    plan = {s.name: s for s in record_demo.build_plan()}
    bundle = _bundle(tmp_path / "w.palbundle", [
        "make demo-workspace (…; 1.5 h of recording on 2 CPU cores)",
        plan["memories"].how + " — 10 min",
        plan["tour-dialogues"].how + " — 22 min",
        plan["h2memory-1006"].how + " — 9 min",
        "not yet recorded: tour-verdicts, …",
        record_demo.REDONE + "run-1006-gold-aa, run-1002-rag-turn-bb"])
    home = tmp_path / "fresh-home"
    assert record_demo.main(["--home", str(home), "--out", str(bundle), "--minutes", "0"]) == 0
    assert made[0][3:] == ["workspace", "import", str(bundle)]  # the bundle's records come into the new home first
    ledger = json.loads((home / "recording.json").read_text())
    assert {n for n, e in ledger["stages"].items() if e["status"] == "done"} == {"memories", "tour-dialogues",
                                                                                "h2memory-1006"}
    assert ledger["stages"]["tour-dialogues"]["seconds"] == 22 * 60
    hows = [made[-1][i + 1] for i, word in enumerate(made[-1]) if word == "--how"]
    assert "0.7 h of recording" in hows[0]  # 41 minutes recorded before, counted in the new bundle
    assert hows[-2].startswith("not yet recorded: tour-verdicts, h2memory-1002,")
    assert hows[-1] == record_demo.REDONE + "run-1006-gold-aa, run-1002-rag-turn-bb"  # the runs made anew before
    made.clear()  # a second run keeps its own ledger and imports nothing again
    assert record_demo.main(["--home", str(home), "--out", str(bundle), "--minutes", "0"]) == 0
    assert [c[3:5] for c in made] == [["workspace", "export"]]


def test_a_bundle_that_will_not_import_stops_the_recording(tmp_path, calls):
    made, codes = calls
    codes["import"] = 2
    bundle = _bundle(tmp_path / "w.palbundle", [])
    assert record_demo.main(["--home", str(tmp_path / "h"), "--out", str(bundle)]) == 1
    assert [c[3:5] for c in made] == [["workspace", "import"]]  # nothing recorded over it, nothing exported
    assert record_demo.main(["--home", str(tmp_path / "h2"), "--out", str(bundle), "--fresh", "--minutes", "0"]) == 0


def test_users_come_whole_one_at_a_time():
    names = [s.name for s in record_demo.build_plan()]
    per_user = [n for n in names if n.startswith(("dialogues-", "verdicts-"))]
    assert per_user[:4] == ["dialogues-1000", "verdicts-1000", "dialogues-1001", "verdicts-1001"]
    verdicts = {s.name: s for s in record_demo.build_plan()}["verdicts-1006"]
    assert len(verdicts.commands) == 6 and all(_flag(c, "--users") == "1006" for c in verdicts.commands)


def _recorded_home(tmp_path, runs: list[tuple[str, str, str, str, str]], shown: dict[str, tuple[str, str]] | None = None):
    """A recording's home where every stage is done, ``runs`` (run, user, sample, topic, method) are stored and
    review batches show pairs of them (``shown``: batch → (run_a, run_b))."""
    import sqlite3

    ledger = {"stages": {s.name: {"seconds": 60.0, "status": "done", "how": s.how}
                         for s in record_demo.build_plan()}}
    (tmp_path / "recording.json").write_text(json.dumps(ledger))
    con = sqlite3.connect(tmp_path / "runs.sqlite")
    con.execute("CREATE TABLE sim_runs (run_id TEXT, user_id TEXT, sample_id TEXT, topic_key TEXT, method TEXT)")
    con.executemany("INSERT INTO sim_runs VALUES (?, ?, ?, ?, ?)", runs)
    con.execute("CREATE TABLE review_items (batch_id TEXT, item_no INTEGER, item_key TEXT, payload TEXT)")
    con.executemany("INSERT INTO review_items VALUES (?, 1, 'k', ?)",
                    [(b, json.dumps({"run_a": a, "run_b": z})) for b, (a, z) in (shown or {}).items()])
    con.commit()
    con.close()


def test_redo_discards_the_runs_and_runs_again_only_the_stages_that_made_judged_or_checked_them(tmp_path, calls):
    made, _ = calls
    _recorded_home(tmp_path, [("run-1005-rag-turn-aa", "1005", "1005_sample7", "topic-1", "rag-turn")])
    out = ["--home", str(tmp_path), "--out", str(tmp_path / "w.palbundle")]
    assert record_demo.main([*out, "--redo", "run-1005-rag-turn-aa,run-1004-gold-missing"]) == 1
    assert made == []  # a run not in the recording: nothing discarded, nothing run
    assert record_demo.main([*out, "--redo", "run-1005-rag-turn-aa"]) == 0
    pal = [c[3:] for c in made]
    assert pal[0] == ["runs", "discard", "run-1005-rag-turn-aa", "--yes"]
    assert [c[0] for c in pal[1:]] == ["simulate", "judge", "judge", "judge", "simulate", "workspace"]
    assert "1005_sample7_topic-1" in _flag(pal[1], "--task-ids") and {_flag(c, "--users") for c in pal[2:5]} == {"1005"}
    assert pal[5][:2] == ["simulate", "fidelity"]
    assert any(h.startswith("recorded anew after a rule changed (discarded with their judgments): run-1005-rag-turn-aa")
               for h in (pal[-1][i + 1] for i, word in enumerate(pal[-1]) if word == "--how"))
    ledger = json.loads((tmp_path / "recording.json").read_text())
    again = ledger["stages"]["dialogues-1005"]
    assert again["status"] == "done" and again["seconds"] >= 60.0  # ran again; the minutes before are kept
    assert ledger["redone"] == ["run-1005-rag-turn-aa"]


def test_a_run_a_review_batch_shows_goes_with_the_batch_and_the_batch_is_made_again(tmp_path, calls):
    made, codes = calls
    _recorded_home(tmp_path, [("run-1002-gold-aa", "1002", "1002_sample7", "topic-1", "gold"),
                              ("run-1002-gold-bb", "1002", "1002_sample8", "topic-1", "gold")],
                   shown={"b-1": ("run-1002-vanilla-log-cc", "run-1002-gold-aa")})
    out = ["--home", str(tmp_path), "--out", str(tmp_path / "w.palbundle"), "--minutes", "0"]
    assert record_demo.main([*out, "--redo", "run-1002-gold-bb"]) == 0  # a run no batch shows: the batch stays
    assert [c[3:5] for c in made[:1]] == [["runs", "discard"]]
    ledger = json.loads((tmp_path / "recording.json").read_text())
    assert ledger["stages"]["review-batch"]["status"] == "done"
    assert ledger["stages"]["tour-verdicts"]["status"] == "done"  # the tour's judges judge only the tour's topics
    made.clear()
    codes["review"] = 2  # an annotator answered in it: refused, nothing discarded
    assert record_demo.main([*out, "--redo", "run-1002-gold-aa"]) == 1
    assert [c[3:] for c in made] == [["review", "delete", "b-1", "--yes"]]
    made.clear()
    codes.pop("review")
    assert record_demo.main([*out, "--redo", "run-1002-gold-aa"]) == 0
    assert [c[3:5] for c in made[:2]] == [["review", "delete"], ["runs", "discard"]]
    ledger = json.loads((tmp_path / "recording.json").read_text())
    assert {n for n, e in ledger["stages"].items() if e["status"] == "pending"} == {
        "tour-dialogues", "tour-verdicts", "h2memory-verdicts", "review-batch", "dialogues-1002", "verdicts-1002",
        "simulator-fidelity"}


def test_a_tour_run_is_made_again_by_the_tour_stages_and_the_users_own():
    plan = record_demo.build_plan()
    assert record_demo.stages_making(plan, "1002", "1002_sample7_topic-1", "gold") == [
        "tour-dialogues", "tour-verdicts", "h2memory-verdicts", "dialogues-1002", "verdicts-1002", "simulator-fidelity"]
    assert record_demo.stages_making(plan, "1002", "1002_sample8_topic-1", "gold") == [
        "dialogues-1002", "verdicts-1002", "simulator-fidelity"]
    assert record_demo.stages_making(plan, "1006", "1006_sample8_topic-1", "h2memory") == [
        "dialogues-1006", "verdicts-1006", "simulator-fidelity"]  # h2memory-verdicts judges the tour's topics only


def test_a_take_is_simulated_at_its_own_seed_and_no_seed_0_run_of_it_is_made(monkeypatch):
    monkeypatch.setattr(record_demo, "TAKES", {"1002_sample7_topic-1/gold": "3"})
    plan = {s.name: s for s in record_demo.build_plan()}
    for stage, tasks in (("tour-dialogues", record_demo.TOUR_TASKS), ("dialogues-1002", record_demo.two_topics("1002"))):
        made = {(task, method, c[c.index("--seed") + 1] if "--seed" in c else "0")
                for c in plan[stage].commands
                for task in _flag(c, "--task-ids").split(",") for method in _flag(c, "--methods").split(",")}
        methods = {m for c in plan[stage].commands for m in _flag(c, "--methods").split(",")}
        assert made == {(t, m, "3" if (t, m) == ("1002_sample7_topic-1", "gold") else "0")
                        for t in tasks for m in methods}
    assert len(plan["dialogues-1006"].commands) == 1  # no take: one command, as before
    assert "--seed" not in plan["dialogues-1006"].commands[0]
    assert record_demo.stages_making(record_demo.build_plan(), "1002", "1002_sample7_topic-1", "gold")[:2] == [
        "tour-dialogues", "tour-verdicts"]


def _hows(export: list[str]) -> list[str]:
    return [export[i + 1] for i, word in enumerate(export) if word == "--how"]


def test_refresh_derived_makes_the_derived_records_again_without_an_llm_then_exports(tmp_path, calls):
    made, _ = calls
    _recorded_home(tmp_path, [])
    out = ["--home", str(tmp_path), "--out", str(tmp_path / "w.palbundle"), "--refresh-derived"]
    assert record_demo.main(out) == 0
    pal = [c[3:] for c in made]
    assert pal[-1][:2] == ["workspace", "export"]
    measured = {_flag(c, "--method"): _flag(c, "--users") for c in pal[:-1] if c[:2] == ["memory", "fidelity"]}
    assert measured == {**{m: "all" for m in record_demo.NO_LLM_MEMORIES}, "h2memory": ",".join(record_demo.H2_USERS)}
    assert pal[-2][:2] == ["simulate", "fidelity"]  # every stored run checked once the memories are measured
    assert len(pal) == len(measured) + 2  # nothing recorded: no simulation, no judgment, no build
    assert not any("--build" in c or "--judge" in c or "--classifier" in c for c in pal)
    defs = record_demo.definitions()
    line = next(h for h in _hows(made[-1]) if h.startswith(record_demo.REFRESHED))
    assert record_demo.definitions_text(defs) in line and time.strftime("%Y-%m-%d", time.gmtime()) in line
    ledger = json.loads((tmp_path / "recording.json").read_text())
    assert ledger["refreshed"]["definitions"] == defs and ledger["refreshed"]["status"] == "done"
    made.clear()  # under the same definitions it only exports, still saying what was refreshed and when
    assert record_demo.main(out) == 0
    assert [c[3:5] for c in made] == [["workspace", "export"]] and line in _hows(made[-1])


def test_a_refresh_cut_short_resumes_and_new_definitions_refresh_again(tmp_path, calls, monkeypatch):
    made, codes = calls
    _recorded_home(tmp_path, [])
    out = ["--home", str(tmp_path), "--out", str(tmp_path / "w.palbundle"), "--refresh-derived"]
    codes["simulate"] = 1  # the checks fail this time
    assert record_demo.main(out) == 1
    assert not any(h.startswith(record_demo.REFRESHED) for h in _hows(made[-1]))  # not refreshed: not said so
    made.clear()
    codes.clear()
    assert record_demo.main(out) == 0
    assert sum(c[3:5] == ["memory", "fidelity"] for c in made) == len(record_demo.NO_LLM_MEMORIES) + 1  # resumed
    made.clear()
    monkeypatch.setattr(record_demo, "definitions", lambda: {"memory_fidelity": "9", "gold": "9", "checks": "9",
                                                             "rulebook": "r"})
    assert record_demo.main(out) == 0
    assert any(c[3:5] == ["simulate", "fidelity"] for c in made)
    assert "memory fidelity v9 (gold v9) and simulator-fidelity checks v9 (rulebook r)" in _hows(made[-1])[-1]


def test_an_unfinished_h2memory_build_is_not_measured_by_a_refresh():
    stages = {s.name: {"status": "done"} for s in record_demo.build_plan()}
    stages["h2memory-1006"] = {"status": "failed (exit 1): …"}
    commands = record_demo.refresh_stage({"stages": stages}).commands
    assert [_flag(c, "--users") for c in commands if "h2memory" in c] == ["1002,1007"]


DEFS = {"memory_fidelity": "3", "gold": "2", "checks": "7", "rulebook": "rb"}


def _derived_home(home):
    """A home holding fidelity reports and simulator-fidelity results under current and older definitions."""
    import sqlite3

    home.mkdir(exist_ok=True)
    con = sqlite3.connect(home / "runs.sqlite")
    con.execute("CREATE TABLE memory_fidelity (fidelity_key TEXT, dataset TEXT, user_id TEXT, method TEXT, "
                "build_id TEXT, embedder TEXT, threshold REAL, data TEXT, created_at REAL)")
    report = [("old-1000", "1000", "gold", "2"), ("new-1000", "1000", "gold", "3"),  # replaced
              ("old-1001", "1001", "gold", "2"),  # no current report of it: kept (stale, readable)
              ("old-1000-ref", "1000", "ref:empty", "2"), ("new-1000-ref", "1000", "ref:empty", "3")]
    con.executemany("INSERT INTO memory_fidelity VALUES (?, 'd', ?, ?, 'b', 'minilm', 0.5, ?, 0)",
                    [(k, u, m, json.dumps({"metric_version": v, "gold_version": "2"})) for k, u, m, v in report])
    con.execute("CREATE TABLE sim_fidelity (key TEXT, run_id TEXT, dataset TEXT, user_id TEXT, method TEXT, "
                "simulator TEXT, embedder TEXT, data TEXT, created_at REAL)")
    results = [("old-a", "run-a", {"checks_version": "5"}), ("new-a", "run-a", {"checks_version": "7", "rulebook": "rb"}),
               ("other-rulebook-a", "run-a", {"checks_version": "7", "rulebook": "xx"}),
               ("old-b", "run-b", {"checks_version": "5"})]
    con.executemany("INSERT INTO sim_fidelity VALUES (?, ?, 'd', '1000', 'gold', 'llm', 'minilm', ?, 0)",
                    [(k, r, json.dumps(d)) for k, r, d in results])
    con.commit()
    con.close()


def test_the_export_leaves_out_records_made_again_and_the_recording_keeps_them(tmp_path):
    import sqlite3

    home = tmp_path / "rec"
    _derived_home(home)
    assert record_demo.superseded(home, DEFS) == {"memory_fidelity": 2, "sim_fidelity": 2}
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(home, copy)
    assert record_demo.drop_superseded(copy, DEFS) == {"memory_fidelity": 2, "sim_fidelity": 2}
    con = sqlite3.connect(copy / "runs.sqlite")
    assert [r[0] for r in con.execute("SELECT fidelity_key FROM memory_fidelity ORDER BY 1")] == [
        "new-1000", "new-1000-ref", "old-1001"]
    assert [r[0] for r in con.execute("SELECT key FROM sim_fidelity ORDER BY 1")] == ["new-a", "old-b"]
    assert record_demo.superseded(copy, DEFS) == {}
    assert record_demo.superseded(home, DEFS) == {"memory_fidelity": 2, "sim_fidelity": 2}  # untouched


def test_an_export_after_a_refresh_reads_a_copy_without_the_replaced_records(tmp_path, monkeypatch):
    import sqlite3

    home = tmp_path / "rec"
    _derived_home(home)
    _recorded_home(home, [])
    monkeypatch.setattr(record_demo, "definitions", lambda: DEFS)
    seen: list[tuple[str, int]] = []

    def call(command, cwd, env):
        db = sqlite3.connect(Path(env["PAL_HOME"]) / "runs.sqlite")
        seen.append((env["PAL_HOME"], db.execute("SELECT count(*) FROM memory_fidelity").fetchone()[0]))
        return 0

    monkeypatch.setattr(record_demo.subprocess, "call", call)
    assert record_demo.main(["--home", str(home), "--out", str(tmp_path / "w.palbundle"), "--only-export"]) == 0
    assert len(seen) == 1 and seen[0][0] != str(home) and seen[0][1] == 3


def test_a_fresh_home_keeps_saying_what_the_bundle_was_refreshed_under(tmp_path, calls):
    made, _ = calls
    line = record_demo.REFRESHED + "memory fidelity v3 (gold v2) and … on 2026-12-06: … — 4 min"
    bundle = _bundle(tmp_path / "w.palbundle", [line])
    assert record_demo.main(["--home", str(tmp_path / "h"), "--out", str(bundle), "--minutes", "0"]) == 0
    assert line in _hows(made[-1])
