"""Run figures and the leaderboard from turn checks written by hand: over-cooperation, pooled rates, runs without
gold apart, and the distribution distances with their two-sample tests (checked against scipy by hand)."""

import pytest
from scipy import stats

from evaluation.simfidelity.aggregate import distances, leaderboard, run_figures
from evaluation.simfidelity.export import board_csv, board_rows
from evaluation.simfidelity.types import RunFidelity, SimFidelityConfig, TurnCheck, TurnChecks


def verdict(expected: str, stance: str, turn: int = 3) -> TurnChecks:
    ok = "pass" if expected == stance else "fail"
    return TurnChecks(turn_no=turn, act="Solution Feedback", text="…", features={"length": 5, "questions": 0,
                                                                                  "first_person": 1},
                      checks=[TurnCheck(check="verdict", outcome=ok, reason="",
                                        evidence={"expected": expected, "stance": {"label": stance}}),
                              TurnCheck(check="persona", outcome="pass", reason="")])


def vague(gap: float) -> TurnChecks:
    return TurnChecks(turn_no=1, act="Topic Inquiry", text="…", features={"length": 9, "questions": 1,
                                                                           "first_person": 0},
                      checks=[TurnCheck(check="vague", outcome="pass" if gap > 0 else "fail", reason="",
                                        evidence={"gap": gap})])


def result(run_id: str, turns, simulator="llm", model="m", no_gold=None, reference=None) -> RunFidelity:
    figures, counts = run_figures(turns)
    return RunFidelity(run_id=run_id, dataset="d", user_id="u", sample_id="s", topic_key=run_id, method="vanilla",
                       mode="fixed", simulator=simulator, simulator_model=model, status="finished", utterances=6,
                       embedder="hash", threshold=0.5, config=SimFidelityConfig(), no_gold=no_gold, turns=turns,
                       figures=figures, counts=counts, reference=reference or [])


def test_over_cooperation_is_acceptance_minus_what_the_gold_implies():
    figures, counts = run_figures([verdict("accept", "accept"), verdict("reject", "accept", 4),
                                   verdict("reject", "reject", 5), vague(0.2)])
    assert counts["verdict_matched"] == 3 and counts["accepted"] == 2 and counts["implied"] == 1
    assert figures["acceptance_rate"] == pytest.approx(2 / 3) and figures["implied_acceptance"] == pytest.approx(1 / 3)
    assert figures["over_cooperation"] == pytest.approx(1 / 3)
    assert figures["verdict_consistency"] == pytest.approx(2 / 3) and figures["persona_rate"] == 1.0
    assert figures["vagueness_gap"] == pytest.approx(0.2) and figures["truthful_rate"] is None


def test_leaderboard_pools_turns_per_simulator_and_keeps_no_gold_apart():
    rows = leaderboard([result("a", [verdict("accept", "accept"), vague(0.1)]),
                        result("b", [verdict("reject", "accept"), vague(-0.3)]),
                        result("c", [], no_gold="n/a — no gold: free"),
                        result("d", [verdict("reject", "accept")], simulator="always-accept", model="always-accept")])
    assert [r["simulator"] for r in rows] == ["always-accept", "llm"]  # reference simulators first
    llm = rows[1]
    assert llm["runs"] == 3 and llm["no_gold"] == 1 and llm["passed"] == 1 and llm["turns"] == 4
    assert llm["acceptance_rate"] == 1.0 and llm["implied_acceptance"] == 0.5 and llm["over_cooperation"] == 0.5
    assert llm["vague_rate"] == 0.5 and llm["vagueness_gap"] == pytest.approx(-0.1)
    assert rows[0]["over_cooperation"] == 1.0


def test_distances_use_the_named_two_sample_tests():
    sim = [{"length": x, "questions": q, "first_person": f} for x, q, f in
           [(5, 0, 1), (6, 1, 1), (7, 0, 1), (30, 2, 0), (8, 0, 1)]]
    ref = [{"length": x, "questions": q, "first_person": f} for x, q, f in
           [(20, 1, 1), (22, 1, 0), (25, 2, 1), (21, 1, 1)]]
    d = distances(sim, ref)
    ks = stats.ks_2samp([5, 6, 7, 30, 8], [20, 22, 25, 21])
    assert d["length"]["distance"] == pytest.approx(ks.statistic) and d["length"]["p"] == pytest.approx(ks.pvalue)
    assert d["questions"]["distance"] == pytest.approx(0.6 - 1.25)
    assert d["questions"]["p"] == pytest.approx(stats.mannwhitneyu([0, 1, 0, 2, 0], [1, 1, 2, 1]).pvalue)
    assert d["first_person"]["distance"] == pytest.approx(0.8 - 0.75)
    assert d["first_person"]["p"] == pytest.approx(stats.fisher_exact([[4, 1], [3, 1]]).pvalue)
    assert distances(sim[:1], ref)["length"]["p"] is None  # one turn: no test


def test_board_exports_flat_rows_and_csv():
    rows = leaderboard([result("a", [verdict("accept", "accept"), vague(0.1)],
                               reference=[{"length": 4, "questions": 1, "first_person": 1}] * 3)])
    flat = board_rows(rows)
    assert [r["on"] for r in flat] == ["kept", "first drafts"]  # every figure on what was kept and on first drafts
    assert flat[0]["simulator"] == "llm" and flat[0]["length_p"] is not None and "over_cooperation" in flat[0]
    assert all("intervention_share" in r and "composed_share" in r for r in flat)
    text = board_csv(rows)
    assert text.splitlines()[0].startswith("simulator,model,on,runs") and "checks_version" in text.splitlines()[0]
    assert board_csv([]) == "simulator,model,on,runs\n"
