"""Figures read from recorded LLM calls: kinds of work, JSON validity, cache share (bench/recorded_work.py)."""

from __future__ import annotations

import sqlite3

from bench.recorded_work import load_figures, main, render

COLUMNS = ("ts, role, provider, endpoint, model, prompt_name, tokens_in, tokens_out, latency_ms, cache_hit, attempts, "
           "structured_ok, error, tokens_cached, tokens_processed")


def _db(tmp_path, rows):
    db = tmp_path / "runs.sqlite"
    con = sqlite3.connect(db)
    con.execute(f"CREATE TABLE llm_calls (id INTEGER PRIMARY KEY, {COLUMNS})")
    con.executemany(f"INSERT INTO llm_calls ({COLUMNS}) VALUES ({', '.join('?' * 15)})", rows)
    con.commit()
    con.close()
    return db


def _row(prompt, ok=None, attempts=1, cached=None, processed=None, hit=0, ts=1.0, tokens_in=100):
    return (ts, "r", "local", "e", "m", prompt, tokens_in, 10, 2000.0, hit, attempts, ok, None, cached, processed)


def test_calls_are_grouped_by_kind_of_work_and_the_cache_share_counts_only_calls_that_said(tmp_path):
    db = _db(tmp_path, [
        _row("memory/h2_situation", ok=1, cached=60, processed=40),
        _row("memory/h2_log_graph", ok=1, attempts=2, cached=0, processed=100),
        _row("memory/h2_log_graph", ok=0, attempts=3),  # the endpoint said nothing of its cache
        _row("memory/h2_log_graph", ok=1, hit=1),  # served from PAL Studio's own response cache: not model work
        _row("sim/user_simulator", cached=90, processed=10, ts=5.0),
    ])
    figs = load_figures(db)
    build = figs[("H²Memory build", "m", "")]
    assert (build.calls, build.structured, build.valid, build.first_try) == (3, 3, 2, 1)
    assert (build.cached, build.known, build.prompt) == (60, 200, 300)
    assert "30 %" in build.cells()  # 60 of the 200 prompt tokens whose origin is known
    assert figs[("simulation", "m", "")].cells()[1] == "n/a"  # no structured call: no JSON figure
    assert set(load_figures(db, since=2.0)) == {("simulation", "m", "")}
    by_prompt = load_figures(db, by_prompt=True)
    assert by_prompt[("H²Memory build", "m", "memory/h2_log_graph")].calls == 2
    assert "memory/h2_situation" in render(by_prompt)


def test_a_home_without_records_says_so(tmp_path, capsys):
    assert main(["--home", str(tmp_path)]) == 0
    assert "nothing recorded" in capsys.readouterr().out
