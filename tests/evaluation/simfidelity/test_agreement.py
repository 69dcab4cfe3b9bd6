"""People check the checker: a simturn batch's answers against the stored automatic checks, Cohen's κ against the
human majority and Fleiss' κ with the checks as one more rater (hand-computed values), "does not apply" left out."""

import pytest

from evaluation.simfidelity.agreement import checker_agreement
from evaluation.simfidelity.export import checker_csv
from evaluation.simfidelity.types import RunFidelity, SimFidelityConfig, TurnCheck, TurnChecks
from review.batches import TASKS, plan_batch, simturn_candidates
from testkit.workspace import make_workspace

AUTO = ["pass", "pass", "fail", "fail", "n/a"]  # the persona check of turns 1–5 of run r1
HUMAN_A = ["yes", "yes", "no", "yes", "yes"]
HUMAN_B = ["yes", "no", "no", "yes", "no"]


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path / "pal")


def stored(ws):
    turns = [TurnChecks(turn_no=n, act="Solution Discussion", text="t",
                        checks=[TurnCheck(check="persona", outcome=o, reason="")]) for n, o in enumerate(AUTO, 1)]
    ws.simfidelity.save(RunFidelity(key="simfid-r1-x", run_id="r1", dataset="d", user_id="u", sample_id="s",
                                    topic_key="t", method="m", mode="fixed", simulator="llm", simulator_model="m",
                                    status="finished", utterances=10, embedder="hash", threshold=0.5,
                                    config=SimFidelityConfig(), turns=turns))


def batch(ws, overlap=2, people=("ann", "bob")):
    turns = [{"run_id": "r1", "user_id": "u", "sample_id": "s", "topic_key": "t", "turn_no": n, "act": "x"}
             for n in range(1, 6)] + [{"run_id": "r2", "user_id": "u", "sample_id": "s", "topic_key": "t",
                                       "turn_no": 1, "act": "x"}]
    plan = plan_batch("check", "simturn", "d", simturn_candidates(turns), 6, 0, overlap, list(people))
    batch_id = ws.reviews.create_batch(plan, "admin")
    return batch_id, {f"{i['payload']['run_id']}/{i['payload']['turn_no']}": i["item_no"]
                      for i in ws.reviews.items(batch_id)}


def test_candidates_name_no_simulator_and_the_task_asks_the_checks():
    (key, payload), = simturn_candidates([{"run_id": "run-u-gold-1a2b", "user_id": "u", "sample_id": "s",
                                           "topic_key": "t", "turn_no": 3, "act": "Solution Feedback",
                                           "simulator": "llm", "model": "qwen", "method": "gold"}])
    assert key.startswith("u/s/t/") and key.endswith("/3") and "run-u-gold" not in key  # bundles re-key run ids
    assert set(payload) == {"run_id", "user_id", "sample_id", "topic_key", "turn_no", "act"}
    assert [q.key for q in TASKS["simturn"].required] == ["vague", "truthful", "verdict", "persona", "act"]


def test_cohen_and_fleiss_against_the_checks(ws):
    stored(ws)
    batch_id, items = batch(ws)
    for n, (a, b) in enumerate(zip(HUMAN_A, HUMAN_B), 1):
        ws.reviews.answer(batch_id, items[f"r1/{n}"], "ann", "persona", a)
        ws.reviews.answer(batch_id, items[f"r1/{n}"], "bob", "persona", b)
    ws.reviews.answer(batch_id, items["r2/1"], "ann", "persona", "yes")
    report = checker_agreement(ws.reviews, batch_id, ws.simfidelity)
    persona = next(q for q in report["questions"] if q["question"] == "persona")
    # majorities: yes, split, no, yes, split → pairs (auto, human): (yes, yes), (no, no), (no, yes); turn 5 has no auto
    assert persona["items"] == 3 and persona["agreement"] == pytest.approx(2 / 3)
    # Cohen: po = 2/3, pe = (1/3·2/3) + (2/3·1/3) = 4/9 → κ = (2/3 − 4/9) / (1 − 4/9) = 0.4
    assert persona["cohen_kappa"] == pytest.approx(0.4)
    # Fleiss over the 4 items rated by the check + both annotators (turn 5's check said n/a: left out)
    rows = [["yes", "yes", "yes"], ["yes", "yes", "no"], ["no", "no", "no"], ["no", "yes", "yes"]]
    from review.agreement import fleiss
    assert persona["fleiss_kappa"] == pytest.approx(round(fleiss(rows, ["yes", "no"]), 4))
    assert persona["fleiss_items"] == 4 and persona["fleiss_raters"] == 3
    assert persona["confusion"]["auto no / human yes"] == 1
    assert report["unchecked"] == [items["r2/1"]]  # r2 was never checked
    assert {r["human_majority"] for r in report["items"]} >= {"split", "yes", "no"}
    assert checker_csv(report).splitlines()[0].startswith("item_no,item_key,question,automatic,human_majority")


def test_na_on_either_side_is_left_out_and_counted(ws):
    stored(ws)
    batch_id, items = batch(ws, overlap=1, people=("ann",))
    ws.reviews.answer(batch_id, items["r1/1"], "ann", "persona", "na")
    ws.reviews.answer(batch_id, items["r1/5"], "ann", "persona", "yes")  # the check said n/a
    persona = next(q for q in checker_agreement(ws.reviews, batch_id, ws.simfidelity)["questions"]
                   if q["question"] == "persona")
    assert persona["items"] == 0 and persona["not_applicable"] == 2 and persona["cohen_kappa"] is None
