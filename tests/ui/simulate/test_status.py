"""Where a simulation run is: turn n of N, the phase read from the calls since the last stored turn, an ETA from
measured rates, and why a run ended (a free-mode run that ended early says who ended it)."""

from __future__ import annotations

import pytest

from palset.vocab import Act
from sim.types import RunRecord, RunSpec, Utterance
from ui.simulate.status import end_reason, phase_of, run_status, status_line

SCHEDULE = [(Act.TOPIC_INQUIRY, Act.REQUIREMENT_PREDICTION), (Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_PROPOSAL),
            (Act.SOLUTION_FEEDBACK, Act.FEEDBACK_RESPONSE)]


def record(n_utts: int, mode: str = "fixed", status: str = "running", max_turns: int = 3, acts=None,
           t0: float = 100.0, step: float = 10.0) -> RunRecord:
    spec = RunSpec(dataset="d", user_id="u", sample_id="s", topic_key="t", method="vanilla", mode=mode,
                   max_turns=max_turns)
    flat = acts or [a for pair in SCHEDULE for a in pair]
    utts = [Utterance(turn_no=i // 2 + 1, side="user" if i % 2 == 0 else "assistant",
                      actor="simulator" if i % 2 == 0 else "assistant", act=flat[i], content="x",
                      created_at=t0 + step * (i + 1)) for i in range(n_utts)]
    return RunRecord(run_id="r", spec=spec, status=status, schedule=SCHEDULE if mode == "fixed" else [],
                     utterances=utts)


def call(role: str, prompt: str) -> dict:
    return {"role": role, "prompt_name": prompt, "ts": 1.0}


def test_a_running_fixed_run_says_turn_n_of_n_and_an_eta_from_its_own_pace():
    rec = record(3)  # turn 2's user side stored; the assistant's is next
    s = run_status(rec, [], now=140.0, started=100.0)
    assert (s.turn, s.turns, s.side, s.utterances, s.planned_utterances) == (2, 3, "assistant", 3, 6)
    assert s.rate_s == pytest.approx(10.0) and s.rate_from == "this run"
    assert s.eta_s == pytest.approx(30.0)  # three utterances left at 10 s each
    assert s.fraction == pytest.approx(0.5) and s.elapsed_s == pytest.approx(40.0)
    line = status_line(s)
    assert line.startswith("turn 2 of 3 · drafting the assistant's Solution Proposal") and "30 s left" in line


def test_before_any_turn_the_eta_comes_from_earlier_calls_of_the_same_prompts_or_says_none():
    rec = record(0)
    means = {"sim/user_simulator.zh": (4, 100.0, 10.0, 6.0), "sim/assistant": (4, 100.0, 10.0, 8.0),
             "memory/h2_refine": (9, 1.0, 1.0, 99.0)}
    s = run_status(rec, [], now=105.0, started=100.0, prompt_means=means)
    assert s.rate_s == pytest.approx(7.0) and s.rate_from == "earlier runs' calls" and s.eta_s == pytest.approx(42.0)
    assert "no rate measured yet" in status_line(run_status(rec, [], now=105.0, started=100.0))


def test_the_phase_names_a_draft_asked_again_a_composed_turn_and_a_memory_search():
    assert phase_of("user", "Solution Feedback", []) == "drafting the user's Solution Feedback"
    again = phase_of("user", "Solution Feedback", [call("user_simulator", "sim/user_simulator.zh")])
    assert again.startswith("asked again") and "draft 2" in again and "turn rule" in again
    composed = phase_of("user", "Solution Feedback", [call("user_simulator", "sim/user_simulator"),
                                                      call("user_simulator", "sim/user_decision")])
    assert composed.startswith("composing") and "judging" in composed
    searched = phase_of("assistant", "Solution Proposal", [call("assistant", "sim/query_summary.zh")])
    assert "memory searched" in searched
    assert phase_of("assistant", "X", [call("user_simulator", "sim/user_simulator")]).startswith("drafting")


def test_every_ending_says_why():
    assert "all 3 scheduled" in end_reason(record(6, status="finished"))
    assert "stopped by a person after 2 of 3" in end_reason(record(3, status="stopped"))
    failed = record(2, status="failed")
    failed.error = "timeout after 60 s"
    assert "timeout after 60 s" in end_reason(failed) and "Resume" in end_reason(failed)
    early = record(2, mode="free", status="finished", acts=[Act.TOPIC_INQUIRY, Act.REQUIREMENT_PREDICTION])
    assert "after 1 of up to 3" in end_reason(early) and "simulated user ended" in end_reason(early)
    natural = record(4, mode="free", status="finished", max_turns=5,
                     acts=[Act.TOPIC_INQUIRY, Act.SOLUTION_PROPOSAL, Act.SOLUTION_FEEDBACK, Act.FEEDBACK_RESPONSE])
    assert "feedback" in end_reason(natural) and "natural end" in end_reason(natural)
    assert "limit of 3" in end_reason(record(6, mode="free", status="finished"))
    assert end_reason(record(2)) == ""
    ended = run_status(early, [], now=200.0, started=100.0)
    assert ended.ended and status_line(ended).startswith("finished after 1 of up to 3")
