"""`pal simulate fidelity` as users run it (this checkout's code: ``python -m cli`` from the project root): the
leaderboard as JSON, CSV and a table over stored runs of a reference simulator and the User-LLM, the dataset's own
dialogues as a row, per-turn evidence, "n/a — no gold", stored results, agreement with a simturn review batch, and
clear errors; ``pal simulate --simulator`` refuses an unknown simulator."""

import json
import os
import subprocess
import sys

import pytest

from palset.dataset import dataset_key
from palset.loader import load_dataset
from review.batches import plan_batch, simturn_candidates
from sim.reference import PHRASES
from sim.service import make_spec
from sim.store import run_id_for
from sim.types import RunRecord, Utterance
from testkit.workspace import make_workspace
from tests.conftest import DEMO, ROOT

pytestmark = pytest.mark.slow(seconds=30)


def pal(home, *args):
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PAL_HOME": str(home), "PAL_EMBEDDER": "hash"})


def store(ws, demo, simulator, sample="1000_sample7", topic="topic-1", model="tiny"):
    """A finished run whose user side said the always-accept phrases (the assistant proposed a pos candidate)."""
    spec = make_spec(demo, "1000", sample, topic, "vanilla", simulator=simulator)
    t = next(x for x in demo.users["1000"].session(sample).topics if x.key == topic).topic
    pos = next(c.solution for c in t.candidate_solutions if c.feedback == "pos")
    neg = next(c.solution for c in t.candidate_solutions if c.feedback == "neg")
    rec = ws.sims.create(RunRecord(run_id=run_id_for(spec), spec=spec, settings={"user_simulator": {"model": model}},
                                   schedule=[(a, b) for a, b in [("Topic Inquiry", "Solution Proposal"),
                                                                 ("Solution Feedback", "Solution Proposal"),
                                                                 ("Solution Feedback", "Feedback Response")]]))
    lines = [("user", "Topic Inquiry", t.user_query), ("assistant", "Solution Proposal", pos),
             ("user", "Solution Feedback", PHRASES["en"]["accept"]), ("assistant", "Solution Proposal", neg),
             ("user", "Solution Feedback", PHRASES["en"]["accept"]), ("assistant", "Feedback Response", "Good luck.")]
    for i, (side, act, text) in enumerate(lines):
        ws.sims.add_utterance(rec.run_id, Utterance(turn_no=i // 2 + 1, side=side, act=act, content=text,
                                                    actor="simulator" if side == "user" else "assistant"))
    ws.sims.set_status(rec.run_id, "finished")
    return rec.run_id


@pytest.fixture
def home(tmp_path):
    demo = load_dataset(DEMO)
    ws = make_workspace(tmp_path)
    ids = [store(ws, demo, "always-accept", model="always-accept"), store(ws, demo, "llm", topic="topic-2")]
    return tmp_path, ws, ids


def test_json_has_the_leaderboard_every_turns_evidence_and_definitions(home):
    path, ws, ids = home
    res = pal(path, "simulate", "fidelity", "--dataset", str(DEMO), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    rows = {r["simulator"]: r for r in data["leaderboard"]}
    accept = rows["always-accept"]
    assert accept["acceptance_rate"] == 1.0 and accept["implied_acceptance"] == 0.5
    assert accept["over_cooperation"] == 0.5 and accept["verdict_consistency"] == 0.5
    assert rows["llm"]["simulator_model"] == "tiny"
    run = next(r for r in data["runs"] if r["run_id"] == ids[0])
    verdicts = [c for t in run["turns"] for c in t["checks"] if c["check"] == "verdict"]
    assert [c["evidence"]["label"] for c in verdicts] == ["pos", "neg"] and verdicts[1]["outcome"] == "fail"
    assert set(data["definitions"]["checks"]) == {"vague", "truthful", "verdict", "persona", "act", "decision"}
    assert run["interventions"]["user_turns"] == len(run["turns"]) and "figures_first_drafts" in run
    assert "first_drafts" in rows["llm"] and "interventions" in rows["llm"]
    assert data["human_agreement"] == [] and data["errors"] == {}
    assert {r.run_id for r in ws.simfidelity.results(dataset_key(DEMO))} == set(ids)  # stored


def test_csv_table_filters_and_the_datasets_own_dialogues(home):
    path, _ws, ids = home
    res = pal(path, "simulate", "fidelity", "--dataset", str(DEMO), "--format", "csv", "--simulators", "always-accept")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("simulator,model,on,runs,passed,no_gold") and len(lines) == 3
    assert lines[1].startswith("always-accept,always-accept,kept,1,")
    assert lines[2].startswith("always-accept,always-accept,first drafts,1,")
    res = pal(path, "simulate", "fidelity", "--dataset", str(DEMO), "--runs", ids[1], "--own-dialogues",
              "--users", "1000")
    assert res.returncode == 0, res.stderr
    assert "dataset dialogue" in res.stdout and "llm" in res.stdout
    rows = {tuple(line.split()[:4]) for line in res.stdout.splitlines()}
    assert ("always-accept", "on", "dataset", "dialogue") in rows  # the floors answer the dataset's assistant turns
    assert ("random-verdict", "on", "dataset", "dialogue") in rows
    stored = {r.run_id: r for r in _ws.simfidelity.results(dataset_key(DEMO))}
    own = {i for i in stored if i.startswith("dataset-1000_")}  # stored, so the Evaluate page's board shows them
    assert {stored[i].simulator for i in own} == {"replay", "always-accept", "random-verdict"}
    floor = [stored[i] for i in own if stored[i].simulator == "always-accept"]
    assert any(t.get("verdict") and t.get("verdict").outcome != "n/a" for r in floor for t in r.turns)


def test_agreement_with_a_simturn_batch_is_in_the_json(home):
    path, ws, ids = home
    plan = plan_batch("check", "simturn", dataset_key(DEMO), simturn_candidates([
        {"run_id": ids[0], "user_id": "1000", "sample_id": "1000_sample7", "topic_key": "topic-1", "turn_no": n,
         "act": "x"} for n in (2, 3)]), 2, 0, 1, ["ann"])
    batch_id = ws.reviews.create_batch(plan, "admin")
    for item in ws.reviews.items(batch_id):
        ws.reviews.answer(batch_id, item["item_no"], "ann", "verdict", "yes" if item["payload"]["turn_no"] == 2 else "no")
    data = json.loads(pal(path, "simulate", "fidelity", "--dataset", str(DEMO), "--json").stdout)
    (batch,) = data["human_agreement"]
    verdict = next(q for q in batch["questions"] if q["question"] == "verdict")
    assert batch["batch_id"] == batch_id and verdict["items"] == 2 and verdict["agreement"] == 1.0


def test_clear_errors(tmp_path, home):
    path, _ws, _ids = home
    res = pal(path, "simulate", "fidelity", "--dataset", str(DEMO), "--runs", "run-nope")
    assert res.returncode == 2 and "no simulation run 'run-nope'" in res.stderr
    res = pal(path, "simulate", "fidelity", "--dataset", str(DEMO), "--simulators", "gpt")
    assert res.returncode == 2 and "unknown simulator 'gpt'" in res.stderr
    res = pal(tmp_path / "empty", "simulate", "fidelity", "--dataset", str(DEMO))
    assert res.returncode == 2 and "no simulation run" in res.stderr
    res = pal(path, "simulate", "--dataset", str(DEMO), "--methods", "vanilla", "--simulator", "human")
    assert res.returncode == 2 and "--simulator: unknown simulator 'human'" in res.stderr
    res = pal(path, "simulate", "--methods", "vanilla")
    assert res.returncode == 2 and "needs --dataset" in res.stderr
