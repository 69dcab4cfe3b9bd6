"""The Generate page's time left: finished steps' seconds scaled by their measured share of a generation."""

from __future__ import annotations

import pytest

from synth.registry import NAMES
from synth.store import StepRecord
from ui.generate.eta import StepShares, eta_text, load_shares, seconds_left

SHARES = StepShares(source="for the test", shares={"profile": 1.0, "situations": 3.0, "logs": 6.0})


def rec(step: str, seconds: float, edited: bool = False) -> StepRecord:
    return StepRecord(step=step, output={}, seconds=seconds, edited=edited)


def test_time_left_scales_the_finished_steps_by_their_share():
    assert seconds_left({}, SHARES) is None  # nothing measured yet
    assert seconds_left({"profile": rec("profile", 10)}, SHARES) == pytest.approx(90)  # 10 % done in 10 s
    two = seconds_left({"profile": rec("profile", 10), "situations": rec("situations", 50)}, SHARES)
    assert two == pytest.approx(60 / 0.4 * 0.6)
    slower = seconds_left({"profile": rec("profile", 20), "situations": rec("situations", 100)}, SHARES)
    assert slower == pytest.approx(2 * two)  # a machine twice as slow: twice as long left
    done = {n: rec(n, 5) for n in SHARES.shares}
    assert seconds_left(done, SHARES) is None


def test_an_edited_step_says_nothing_of_the_speed():
    edited = {"profile": rec("profile", 0, edited=True)}
    assert seconds_left(edited, SHARES) is None
    mixed = {"profile": rec("profile", 0, edited=True), "situations": rec("situations", 30)}
    assert seconds_left(mixed, SHARES) == pytest.approx(30 / 0.3 * 0.6)


def test_the_measured_shares_cover_every_step_and_say_where_they_come_from():
    shares = load_shares()
    assert shares is not None and set(shares.shares) == set(NAMES) and all(v >= 0 for v in shares.shares.values())
    assert sum(shares.shares.values()) == pytest.approx(1.0, abs=0.01) and "bench/generation_defaults.py" in shares.source


def test_eta_text_reads_as_a_person_would_say_it():
    assert eta_text(None) == "" and eta_text(42) == "about 42 s left" and eta_text(600) == "about 10 min left"
    assert eta_text(3 * 3600) == "about 3.0 h left"


def test_a_missing_or_broken_shares_file_means_no_eta_and_says_why(tmp_path, caplog):
    broken = tmp_path / "shares.json"
    broken.write_text('{"source": "x", "shares": {}}', encoding="utf-8")
    assert load_shares.__wrapped__(broken) is None and load_shares.__wrapped__(tmp_path / "absent.json") is None
    assert "no ETA for generations" in caplog.text
