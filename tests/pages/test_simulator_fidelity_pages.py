"""AppTests of simulator fidelity on its three pages: the Simulate page (choose a reference simulator, check the run,
a badge per check on each simulated user turn with the evidence in an expander), the Evaluate page (the Simulator
fidelity leaderboard with its check form and CSV, the FairEval filter to runs whose simulator passed) and the Review
page (a blinded batch of simulated user turns, the automatic checks against people)."""

import json

import pandas as pd
import pytest

from backends.config import ROLES, load_config
from backends.llm.fake import ScriptedLLM
from evaluation.service import judge_runs, pair_runs
from evaluation.simfidelity.registry import REGISTRY, REVIEWED
from evaluation.simfidelity.service import matchers, measure_runs
from evaluation.takeaway_words import figure_label
from palset.dataset import dataset_key
from palset.loader import load_dataset
from sim.service import make_spec
from sim.store import run_id_for
from tests.conftest import DEMO
from tests.evaluation.conftest import slots
from tests.pages.apptest import all_markdown, app_workspace, open_page
from tests.sim.conftest import default_reply
from ui import platform_state

UID, SAMPLE, TOPIC = "1001", "1001_sample7", "topic-1"


def reply(req) -> str:
    """The simulation's scripted sides, and a FairEval judge that prefers slot 1."""
    text = next((m.content for m in req.messages if m.role == "user"), "")
    if "assistant-1" in text and "assistant-2" in text:
        slots(req)
        return json.dumps({"analysis": {"assistant-1": "a", "assistant-2": "b", "overall": "c"},
                           "scores": {"assistant-1": 7, "assistant-2": 5}})
    return default_reply(req)


@pytest.fixture
def llm(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_AUTH", "local")
    fake = ScriptedLLM(reply)
    client = app_workspace().with_config(load_config(secrets={}, env={})).llm(providers=dict.fromkeys(ROLES, fake))
    monkeypatch.setattr(platform_state, "llm_client", lambda: client)
    return client


def simulate(client, simulator: str, method: str = "vanilla") -> str:
    dataset = load_dataset(DEMO)
    spec = make_spec(dataset, UID, SAMPLE, TOPIC, method, simulator=simulator)
    app_workspace().open_simulation(dataset, spec, client).run()
    return run_id_for(spec)


def check(run_ids):
    ws = app_workspace()
    records = [ws.sims.load(r) for r in run_ids]
    return measure_runs(records, load_dataset(DEMO), matchers(lambda lang: ws.embedder(None, lang)), ws.simfidelity)


def test_simulate_offers_the_simulators_and_shows_a_badge_per_check_with_its_evidence(llm):
    at = open_page("simulate", user=UID, method="vanilla", simulator="always-accept")
    assert at.selectbox(key="sim_simulator").value == "always-accept"
    assert "Random verdicts (reference: floor)" in at.selectbox(key="sim_simulator").options
    at.button(key="sim_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    run_id = at.query_params["run"]
    record = app_workspace().sims.load(run_id)
    assert record.spec.simulator == "always-accept" and record.status == "finished"
    at = open_page("simulate", run=run_id)
    assert not any("-badge[✓" in m.value for m in at.markdown)  # not checked yet
    at.button(key=f"sim_check_{run_id}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    text = all_markdown(at)
    assert "-badge[✓ in persona]" in text and "-badge[✓ vague]" in text
    assert "Simulated user :" in text and f"{REGISTRY['verdict'].label} " in text
    assert any(e.label.startswith("Why (simulator checks") for e in at.expander)
    stored = app_workspace().simfidelity.of_run(run_id)
    assert stored is not None and len(stored.turns) == sum(u.side == "user" for u in record.utterances)
    assert at.json  # the evidence of each check


def test_replay_in_free_mode_is_a_message_not_a_start(llm):
    at = open_page("simulate", user=UID, method="vanilla", simulator="replay")
    at.segmented_control(key="sim_mode").set_value("free").run()
    assert not at.exception and [w.value for w in at.warning] == [
        "the replay simulator replays the dataset's dialogue\\: it needs the fixed schedule."]  # escaped
    assert "sim_start" not in [b.key for b in at.button]


def simulator_board(at) -> pd.DataFrame:
    """The simulator board's rows as shown: the simulators' table, then the reference simulators' (folded)."""
    frames = [d.value for d in at.dataframe if figure_label("over_cooperation") in d.value.columns]
    return pd.concat(frames, ignore_index=True)


def test_evaluate_board_checks_runs_exports_csv_and_filters_faireval(llm):
    ids = {s: simulate(llm, s) for s in ("always-accept", "random-verdict")}
    ids["llm"] = simulate(llm, "llm", method="vanilla-log")
    at = open_page("evaluate")
    assert "No simulated user checked" in "".join(i.value for i in at.info)
    at.button(key="eval_simfid_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    board = simulator_board(at)
    assert list(board["simulator"]) == ["llm", "always-accept", "random-verdict"]  # the references folded after it
    assert {d.label for d in at.get("download_button")} >= {"Simulator fidelity CSV"}
    dataset = load_dataset(DEMO)
    judge_runs(llm, dataset, app_workspace().sims, app_workspace().evals,
               pair_runs(app_workspace().sims, dataset_key(DEMO), "vanilla-log", "vanilla"), ["requirement"], k=1)
    at = open_page("evaluate", pair="vanilla-log__vanilla", aspect="requirement")
    at.toggle(key="eval_simfid_filter").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    passed = {r.run_id: r.passed for r in app_workspace().simfidelity.results(dataset_key(DEMO))}
    judged = app_workspace().evals.judgments(dataset=dataset_key(DEMO))
    kept = sum(passed.get(j.run_a) is True and passed.get(j.run_b) is True for j in judged)
    assert f"{kept} of {len(judged)} judgment(s) kept" in all_markdown(at)


def test_evaluate_board_gets_its_scale_from_the_datasets_own_dialogues(llm):
    """With no run at all, the dataset's own dialogues (as written, and the floors answering its assistant turns)
    can be checked from the page; their rows are stored and head the board."""
    at = open_page("evaluate")
    at.checkbox(key="eval_simfid_own").check().run()
    at.button(key="eval_simfid_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    board = simulator_board(at)
    rows = list(zip(board["simulator"], board["model"]))
    assert rows == [("replay", "dataset dialogue"), ("always-accept", "on dataset dialogue"),
                    ("random-verdict", "on dataset dialogue")]
    floor = board.set_index("simulator").loc["always-accept"]
    assert floor[figure_label("acceptance_rate")].startswith("100%")  # the proposals match candidates
    assert floor[figure_label("verdict_consistency")] != "–"


def test_review_batch_of_simulated_turns_is_blinded_and_compared_with_the_checks(llm):
    run_id = simulate(llm, "always-accept")
    check([run_id])
    at = open_page("review")
    at.selectbox(key="review_new_task").set_value("simturn").run()
    at.multiselect(key="review_new_annotators").select("local").run()
    at.number_input(key="review_new_n").set_value(2).run()
    at.number_input(key="review_new_overlap").set_value(1).run()
    at.button(key="review_create").click().run()
    assert not at.exception and at.success, [e.value for e in at.exception]
    store = app_workspace().reviews
    batch = next(b for b in store.batches() if b["task"] == "simturn")
    at = open_page("review", batch=batch["batch_id"])
    at.button(key="review_start").click().run()
    text = all_markdown(at)
    assert "The turn to check" in text and "scheduled:" in text
    assert "always-accept" not in text and "badge[✓" not in text  # blinded: no simulator, no automatic outcome
    for item in store.items(batch["batch_id"]):
        for q in REVIEWED:
            store.answer(batch["batch_id"], item["item_no"], "local", q, "yes")
    at = open_page("review", batch=batch["batch_id"])
    assert "Automatic checks vs people" in all_markdown(at)
    table = next(d.value for d in at.dataframe if "cohen_kappa" in d.value.columns)
    assert set(table["question"]) == set(REVIEWED)
    assert {d.label for d in at.get("download_button")} >= {"Checks vs people CSV"}


def test_evaluate_board_probes_over_cooperation_and_shows_each_arms_interventions(llm):
    """Counterfactual probes from the check form become rows of the board (always-accept accepts every disliked
    candidate); the figures switch to the first drafts; the FairEval outcomes show each arm's interventions and can
    keep only runs under a share."""
    ids = [simulate(llm, "llm", method="vanilla-log"), simulate(llm, "llm")]
    at = open_page("evaluate")
    at.multiselect(key="eval_simfid_probes").set_value(["always-accept"]).run()
    at.button(key="eval_simfid_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    board = simulator_board(at).set_index("simulator")
    assert board.loc["always-accept probe", figure_label("disliked_acceptance")] == "100%"
    assert {"intervened", "composed", figure_label("decision_agreement")} <= set(board.columns)
    at.segmented_control(key="eval_simfid_on").set_value("first drafts").run()
    assert not at.exception, [e.value for e in at.exception]
    dataset = load_dataset(DEMO)
    judge_runs(llm, dataset, app_workspace().sims, app_workspace().evals,
               pair_runs(app_workspace().sims, dataset_key(DEMO), "vanilla-log", "vanilla"), ["requirement"], k=1,
               prompts="compact")  # the wording the scripted judge reads
    at = open_page("evaluate", pair="vanilla-log__vanilla", aspect="requirement")
    assert not at.exception, [e.value for e in at.exception]
    arms = next(d.value for d in at.dataframe if "simulated user turns" in d.value.columns)
    users = [sum(u.side == "user" for u in app_workspace().sims.load(i).utterances) for i in ids]
    assert list(arms["simulated user turns"]) == users and len(arms) == 2
    at.toggle(key="eval_interv_filter").set_value(True).run()
    at.slider(key="eval_interv_limit").set_value(1.0).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "1 of 1 judgment(s) kept" in all_markdown(at)
