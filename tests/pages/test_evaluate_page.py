"""AppTest of the Evaluate page with a scripted judge: Judge over paired finished runs, the outcome bars and
diagnostics, the ?pair=&topic= deep link with both orders' samples, escaping, errors as messages, the
single-turn leaderboard from stored results and the placeholders."""

import json

import pytest

from backends.config import ROLES, load_config
from backends.llm.errors import EndpointUnavailable
from backends.llm.fake import ScriptedLLM
from evaluation.service import judge_runs, pair_runs
from evaluation.takeaway_words import figure_label
from evaluation.tasks import TaskResult
from palset.dataset import dataset_key
from palset.loader import load_dataset
from palset.vocab import Act
from review.batches import shown_order
from sim.store import run_id_for
from sim.types import RunRecord, RunSpec, Utterance
from tests.conftest import DEMO
from tests.evaluation.conftest import MARKER, slots
from tests.pages.apptest import all_markdown, app_workspace, open_page
from ui import platform_state
from ui.text import md_escape

USER, SAMPLE = "1000", "1000_sample7"
A, B = "h2memory", "vanilla"
PAIR = f"{A}__{B}"
# topic-1: A has the marker (win); topic-2: B has it (lose); topic-3: neither (the judge prefers slot 2: a flipped tie)
TOPICS = {"topic-1": (MARKER, "plain"), "topic-2": ("plain", MARKER), "topic-3": ("plain", "plain")}


def judge(req) -> str:
    first, _ = slots(req)
    s1, s2 = (9, 4) if MARKER in first else (4, 9)
    return json.dumps({"analysis": {"assistant-1": "first is **bold** [x](y)", "assistant-2": "second one",
                                    "overall": f"overall {s1}-{s2}"},
                       "scores": {"assistant-1": s1, "assistant-2": s2}})


@pytest.fixture
def env(tmp_path, monkeypatch):
    """(ScriptedLLM judge, LLMClient) as the page's client, over a temporary PAL_HOME."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    fake = ScriptedLLM(judge)
    client = app_workspace().with_config(load_config(secrets={}, env={})).llm(providers=dict.fromkeys(ROLES, fake))
    monkeypatch.setattr(platform_state, "llm_client", lambda: client)
    return fake, client


def store_run(method: str, topic: str, words: str) -> RunRecord:
    sims = app_workspace().sims
    spec = RunSpec(dataset=dataset_key(DEMO), user_id=USER, sample_id=SAMPLE, topic_key=topic, method=method)
    rec = sims.create(RunRecord(run_id=run_id_for(spec), spec=spec))
    turns = [("user", Act.TOPIC_INQUIRY, "I need help with my *rota*."),
             ("assistant", Act.REQUIREMENT_PREDICTION, f"Do you need a swap partner? {words} [{method}]"),
             ("user", Act.REQUIREMENT_CONFIRMATION, "Yes, for Boxing Day."),
             ("assistant", Act.SOLUTION_PROPOSAL, f"Ask Aisha to swap. {words}")]
    for i, (side, act, text) in enumerate(turns):
        sims.add_utterance(rec.run_id, Utterance(turn_no=i // 2, side=side, actor="simulator", act=act, content=text))
    sims.set_status(rec.run_id, "finished")
    return sims.load(rec.run_id)


@pytest.fixture
def runs(env):
    return {t: (store_run(A, t, wa), store_run(B, t, wb)) for t, (wa, wb) in TOPICS.items()}


def judge_directly(client, k=1):
    dataset = load_dataset(DEMO)
    pairs = pair_runs(app_workspace().sims, dataset_key(DEMO), A, B)
    return judge_runs(client, dataset, app_workspace().sims, app_workspace().evals, pairs, ["requirement", "preference"], k=k)


def figure(at) -> dict:
    charts = at.get("plotly_chart")
    assert charts, "no chart"
    return json.loads(charts[0].proto.spec)


def test_judge_button_judges_every_paired_topic_and_draws_the_bars(env, runs):
    fake, _ = env
    at = open_page("evaluate", pair=PAIR)
    assert at.selectbox(key="eval_a").value == A and at.selectbox(key="eval_b").value == B
    assert "3 paired topic(s); 3 not judged yet" in all_markdown(at)
    at.number_input(key="eval_k").set_value(1).run()
    at.button(key="eval_judge").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    stored = app_workspace().evals.judgments(dataset=dataset_key(DEMO))
    assert len(stored) == 6 and len(fake.requests) == 6 * 2  # 3 topics × 2 aspects × (1 sample × 2 orders)
    decisions = {(j.topic_key, j.aspect): j.decision for j in stored}
    assert {decisions[(t, "requirement")] for t in TOPICS} == {"win", "lose", "tie"}

    spec = figure(at)
    bars = {t["name"]: t for t in spec["data"] if t["type"] == "bar"}
    assert set(bars) == {figure_label(f"{o}_rate") for o in ("win", "tie", "lose")}
    for name in (figure_label(f"{o}_rate") for o in ("win", "tie", "lose")):
        assert bars[name]["x"] == pytest.approx([1 / 3, 1 / 3]) and bars[name]["text"] == ["1 (33%)", "1 (33%)"]
        assert "array" in bars[name]["error_x"]  # each share with its CI
    ci = next(t for t in spec["data"] if t["type"] == "scatter")
    assert ci["x"] == pytest.approx([0.5, 0.5]) and "array" in ci["error_x"]
    assert len(spec["layout"]["annotations"]) == 2
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Flip rate"] == "33%" and metrics["Invalid samples"] == "0 / 6"
    # headline position figures, per aspect: topic-3 is a flipped tie (inconsistent, not decided); topic-1 and
    # topic-2 are wins/losses both orders agree on, by a margin of 5
    assert metrics["Position consistency"] == "67%" and metrics["Position-decided"] == "0 / 2"
    assert metrics["Win rate (ties ½)"] == "50%" and metrics["Score margin (median)"] == "5.00"
    assert at.dataframe(key="eval_topics_table").value.shape[0] == 3
    assert {b.label for b in at.get("download_button")} >= {"Judgments CSV", "Aggregates CSV",
                                                            "Judgments + aggregates JSONL"}

    at.button(key="eval_judge").click().run()  # nothing left: judging again asks nothing
    assert len(fake.requests) == 12 and "3 paired topic(s); 0 not judged yet" in all_markdown(at)


def test_aspect_selector_filters_the_shown_judgments(env, runs):
    judge_directly(env[1])
    at = open_page("evaluate", pair=PAIR, aspect="preference")
    spec = figure(at)
    assert [t["y"] for t in spec["data"] if t["type"] == "bar"][0] == ["preference"]
    aggregates = next(d.value for d in at.dataframe if "adjusted_win_rate" in d.value.columns)
    assert list(aggregates["aspect"]) == ["preference"]


def test_deep_link_opens_one_topic_with_both_dialogues_and_both_orders(env, runs):
    judge_directly(env[1], k=2)
    at = open_page("evaluate", pair=PAIR, topic=f"{SAMPLE}_topic-1")
    assert not at.exception
    text = all_markdown(at)
    for aspect in ("Requirement", "Preference"):
        assert f"##### {aspect}: :green-badge[win]" in text
    assert text.count("Order 1 (as is)") == 2 and text.count("Order 2 (swapped)") == 2
    assert text.count("sample 2") == 4  # k=2 per order, both orders, both aspects
    assert "overall 9\\-4" in text and "overall 4\\-9" in text  # the swapped order really scored B first
    assert "first is \\*\\*bold\\*\\* \\[x\\]\\(y\\)" in text  # judge text is escaped
    contents = [m.markdown[0].value for m in at.chat_message]
    assert len(contents) == 8  # both runs, four utterances each
    assert any(f"\\[{A}\\]" in c for c in contents) and any(f"\\[{B}\\]" in c for c in contents)
    assert any("my \\*rota\\*" in c for c in contents)  # dialogue text is escaped
    topic = load_dataset(DEMO).users[USER].session(SAMPLE).topics[0].topic
    assert "User query\\:" in text and "Candidate solutions the user likes\\:" in text
    assert md_escape(topic.requirement) in text and md_escape(topic.implicit_needs[0]) in text


def test_an_unknown_topic_is_a_warning(env, runs):
    judge_directly(env[1])
    at = open_page("evaluate", pair=PAIR, topic="nope_topic-9")
    assert any("nope" in w.value for w in at.warning)


def test_a_judge_error_is_a_message_and_finished_judgments_stay(env, runs, monkeypatch):
    fake, _ = env
    calls = {"n": 0}

    def flaky(req):
        calls["n"] += 1
        if calls["n"] > 4:  # the first topic's two aspects (k=1: 2 calls each) succeed, then the endpoint is gone
            raise EndpointUnavailable("judge: cannot reach 127.0.0.1:9 (connection refused)")
        return judge(req)

    monkeypatch.setattr(fake, "_fn", flaky)
    at = open_page("evaluate", pair=PAIR)
    at.number_input(key="eval_k").set_value(1).run()
    at.button(key="eval_judge").click().run()
    assert not at.exception
    assert any("connection refused" in e.value and "press Judge" in e.value for e in at.error)
    assert len(app_workspace().evals.judgments()) == 2
    monkeypatch.setattr(fake, "_fn", judge)
    at.button(key="eval_judge").click().run()
    assert not at.error and len(app_workspace().evals.judgments()) == 6


def test_without_runs_the_page_explains_and_shows_placeholders(env):
    at = open_page("evaluate")
    infos = " ".join(i.value for i in at.info)
    assert "at least two methods" in infos
    assert "No single-turn results" in infos and "no PersonaMem-v2 results yet".lower() in infos.lower()
    assert "pairwise human annotations" in infos


def test_leaderboard_from_stored_bench_results(env):
    store = app_workspace().evals
    for i, (method, g, s) in enumerate([("vanilla", 1.0, 1), ("h2memory", 2.0, 2)]):
        for task in ("restatement", "proposal", "selection"):
            store.save_result(TaskResult(
                result_key=f"res-{i}-{task}", dataset=dataset_key(DEMO), user_id=USER, sample_id=SAMPLE,
                topic_key="topic-1", method=method, task=task, model="m", prompt_name="p", prompt_version="1", ok=True,
                bleu={1: 0.5, 2: 0.25, 3: 0.1, 4: 0.0} if task != "selection" else None,
                g_score=g if task == "restatement" else None, s_score=s if task == "selection" else None))
    at = open_page("evaluate")
    g, s_, r1 = (figure_label(n) for n in ("g_score", "s_score", "restatement_bleu1"))
    frame = next(d.value for d in at.dataframe if g in d.value.columns)
    assert list(frame["method"]) == ["h2memory", "vanilla"]
    assert frame[g].iloc[0].startswith("100.0") and frame[s_].iloc[1].startswith("50.0")
    assert frame[r1].iloc[0].startswith("50.0")


def test_judge_human_agreement_section_from_pairwise_review_answers(env, runs):
    from review.batches import pairwise_candidates, plan_batch, shown_order

    judge_directly(env[1])  # requirement: topic-1 win, topic-2 lose, topic-3 tie (from A's side)
    store = app_workspace().reviews
    cands = pairwise_candidates(app_workspace().sims.list(), B, A)  # stored the other way round
    batch = store.create_batch(plan_batch("P", "pairwise", dataset_key(DEMO), cands, 3, 7, 1, ["ann"]), "boss")
    for item in store.items(batch):
        letter = "A" if shown_order(item["payload"])[0] == A else "B"
        store.answer(batch, item["item_no"], "ann", "requirement", letter)  # A better everywhere
    at = open_page("evaluate", pair=PAIR, aspect="requirement")
    table = next(d.value for d in at.dataframe if "human win" in d.value.columns)
    assert table.loc["judge win", "human win"] == 1 and table.loc["judge lose", "human win"] == 1
    assert table.loc["judge tie", "human win"] == 1
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Matched items"] == "3" and metrics["Agreement (no ties)"] == "50%"


def test_personamem_accuracy_by_type_from_stored_records(env):
    from evaluation.personamem.evaluate import PMRecord

    save_records = app_workspace().personamem.save

    def rec(item, pref_type, correct):
        return PMRecord(item_id=item, form="mcq", method="rag-turn", pref_type=pref_type, who="self", dynamics="static",
                        query="q", model="m", prompt_name="p", prompt_version="1", ok=True, correct=correct)

    save_records([rec("a", "ask_to_forget", True), rec("b", "sensitive_info", False)], "hist")
    at = open_page("evaluate")
    frame = next(d.value for d in at.dataframe if "accuracy" in d.value.columns and "method" in d.value.columns)
    forget = frame[(frame["group"] == "pref_type") & (frame["value"] == "ask_to_forget")].iloc[0]
    assert forget["method"] == "rag-turn" and forget["accuracy"] == 1.0


def test_dropped_topics_length_bias_and_fidelity_are_on_the_page(env, runs):
    """A topic whose baseline run failed is dropped, shown next to win/tie/lose; length bias next to
    position bias; FIDELITY.md opens from the page."""
    sims = app_workspace().sims
    spec = RunSpec(dataset=dataset_key(DEMO), user_id=USER, sample_id="1000_sample8", topic_key="topic-1", method=B)
    rec = sims.create(RunRecord(run_id=run_id_for(spec), spec=spec))
    sims.set_status(rec.run_id, "failed", "assistant, turn 3: no usable utterance after 3 tries")
    store_run_at(A, "1000_sample8", "topic-1")
    judge_directly(env[1])
    at = open_page("evaluate", pair=PAIR, aspect="requirement")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Dropped topics"] == "1" and metrics["Invalid topics"] == "0"
    assert metrics["requirement: win"] == "1" and metrics["requirement: tie"] == "1"
    dropped = frame_with(at, "error")
    assert dropped.shape[0] == 1 and "no usable utterance" in dropped["error"].iloc[0]
    assert dropped[B].iloc[0] == "failed" and dropped[A].iloc[0] == "finished"
    assert "Longer dialogue wins" in metrics and "Length A − B when win" in metrics
    text = all_markdown(at)
    assert "metric versions faireval\\_decision=2" in text
    at.toggle(key="eval_fidelity_doc").set_value(True).run()  # the document is sent only when asked
    assert "FIDELITY — what each number reproduces" in all_markdown(at)
    aggregates = frame_with(at, "adjusted_win_rate")
    assert aggregates["dropped"].iloc[0] == 1 and aggregates["metric_versions"].iloc[0].startswith("faireval_decision")


def frame_with(at, column: str):
    """The first dataframe on the page with this column (plain dataframes have no key in AppTest)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def store_run_at(method: str, sample: str, topic: str) -> RunRecord:
    sims = app_workspace().sims
    spec = RunSpec(dataset=dataset_key(DEMO), user_id=USER, sample_id=sample, topic_key=topic, method=method)
    rec = sims.create(RunRecord(run_id=run_id_for(spec), spec=spec))
    sims.add_utterance(rec.run_id, Utterance(turn_no=0, side="user", actor="simulator", act=Act.TOPIC_INQUIRY,
                                             content="Hi."))
    sims.set_status(rec.run_id, "finished")
    return sims.load(rec.run_id)


def test_send_the_most_uncertain_topics_to_review_then_see_calibrated_outcomes(env, runs):
    """FairEval's human-in-the-loop calibration: topic-3 (a flipped tie, BPDE 1) is the most uncertain; topic-1 and
    topic-2 (BPDE 0) tie, and a seeded draw — not the topics' order — ranks topic-2 first."""

    judge_directly(env[1])
    at = open_page("evaluate", pair=PAIR, aspect="requirement")
    assert at.number_input(key="eval_cal_n").value == 1  # the top 20 % of 3 topics
    assert at.number_input(key="eval_temp_k2").value == 1.0  # k = 3 by default: FairEval's temperature
    assert any("judged at temperature 0" in w.value and "Sampling temperature" in w.value for w in at.warning)
    uncertainty = frame_with(at, "BPDE requirement")
    assert list(uncertainty["topic"]) == ["topic-3", "topic-2", "topic-1"]
    assert list(uncertainty["BPDE requirement"]) == ["1.000", "0.000", "0.000"]
    at.number_input(key="eval_cal_n").set_value(2).run()
    at.multiselect(key="eval_cal_annotators").set_value(["local"]).run()
    at.button(key="eval_cal_send").click().run()
    assert not at.exception and any("2 blinded pairwise item(s)" in s.value for s in at.success)
    store = app_workspace().reviews
    (batch,) = store.batches()
    items = store.items(batch["batch_id"])
    assert sorted(i["payload"]["topic_key"] for i in items) == ["topic-2", "topic-3"]
    assert batch["data"]["calibration"]["methods"] == [A, B]
    assert batch["seed"] != 0 and batch["created_by"] == "local"  # findings 5, 19: a random seed, the real creator
    assert app_workspace().audit.entries(action="review.batch_create")[0].target == batch["batch_id"]
    for item in items:  # people: A better on both
        letter = "A" if shown_order(item["payload"])[0] == A else "B"
        store.answer(batch["batch_id"], item["item_no"], "local", "requirement", letter)
    at = open_page("evaluate", pair=PAIR, aspect="requirement")
    cal = frame_with(at, "calibrated win").iloc[0]
    assert (cal["judged win"], cal["judged tie"], cal["judged lose"]) == (1, 1, 1)
    assert (cal["calibrated win"], cal["calibrated tie"], cal["calibrated lose"]) == (3, 0, 0)
    assert cal["decided by people"] == 2 and cal["overturned"] == 2 and cal["overturn rate"] == 1.0


def test_leaderboard_caption_names_the_english_bleu_tokens_and_judge_failures(env):
    store = app_workspace().evals
    for i, g_ok in enumerate((True, False)):
        store.save_result(TaskResult(
            result_key=f"res-{i}", dataset=dataset_key(DEMO), user_id=USER, sample_id=SAMPLE, topic_key=f"topic-{i + 1}",
            method="vanilla", task="restatement", model="m", prompt_name="p", prompt_version="1", ok=True,
            bleu={1: 0.5, 2: 0.25, 3: 0.1, 4: 0.0}, g_score=2.0 if g_ok else None, g_ok=g_ok))
    at = open_page("evaluate")
    frame = frame_with(at, "G judge failed")
    assert frame["G judge failed"].iloc[0] == 1 and frame[figure_label("g_score")].iloc[0].startswith("100.0")
    text = all_markdown(at)
    assert "English with lower-cased word tokens" in text and "not comparable" in text


def test_agreement_section_labels_cohen_and_fleiss(env, runs):
    from review.batches import pairwise_candidates, plan_batch

    judge_directly(env[1])
    store = app_workspace().reviews
    cands = pairwise_candidates(app_workspace().sims.list(), A, B)
    batch = store.create_batch(plan_batch("P", "pairwise", dataset_key(DEMO), cands, 3, 7, 1, ["ann"]), "boss")
    for item in store.items(batch):
        letter = "A" if shown_order(item["payload"])[0] == A else "B"
        store.answer(batch, item["item_no"], "ann", "requirement", letter)
    at = open_page("evaluate", pair=PAIR, aspect="requirement")
    metrics = {m.label: m.value for m in at.metric}
    assert "Cohen's κ, judge vs human majority (no ties)" in metrics
    assert metrics["Fleiss' κ, judge + annotators (non-tie)"] != "–"  # topic-1 and topic-2 are non-tie items
    assert metrics["Fleiss' κ, annotators only (non-tie)"] == "–"  # one annotator: no inter-annotator κ
def test_a_judgment_without_room_in_the_window_says_why_and_reasoning_shows_apart(env, runs, monkeypatch):
    def thinking(req):
        return "<think>JUDGE-THOUGHT</think>" + judge(req)

    ws = app_workspace()
    clean = ws.with_config(load_config(secrets={}, env={}))
    small = clean.llm(providers=dict.fromkeys(ROLES, ScriptedLLM(judge, window=900)))
    dataset = load_dataset(DEMO)
    pairs = pair_runs(ws.sims, dataset_key(DEMO), A, B)
    judge_runs(small, dataset, ws.sims, ws.evals, pairs[:1], ["requirement"], k=1)
    thinker = clean.llm(providers=dict.fromkeys(ROLES, ScriptedLLM(thinking)))
    judge_runs(thinker, dataset, ws.sims, ws.evals, pairs[:1], ["preference"], k=1)
    at = open_page("evaluate", pair=PAIR, topic=f"{SAMPLE}_{pairs[0].topic_key}")
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("Not judged: judge prompt of") and "never cut" in w for w in warnings)
    assert "Judge's reasoning (kept apart from the scores)" in [e.label for e in at.expander]
    assert any("JUDGE-THOUGHT" in c.value for c in at.code)
    assert "JUDGE\\-THOUGHT" not in all_markdown(at)
def test_experiments_show_the_report_tables_of_a_finished_experiment(tmp_path, monkeypatch):
    from testkit.run_experiment import run

    home = tmp_path / "pal"
    monkeypatch.setenv("PAL_HOME", str(home))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    assert run(home, DEMO.parent.parent / "experiments" / "demo-small.toml").startswith("[40/40]")
    at = open_page("evaluate")
    assert at.selectbox(key="eval_experiment").value.startswith("exp-demo-small-")
    assert not at.error, [e.value for e in at.error]
    frames = [d.value for d in at.dataframe]  # (a read-only dataframe keeps no key in AppTest)
    fair = next(f for f in frames if "aspect" in f and "vs" in f)
    assert list(fair["aspect"]) == ["preference", "requirement"] and list(fair["win"]) == ["4", "0"]
    single = next(f for f in frames if "R-B1" in f)
    assert list(single["method"]) == ["vanilla-log", "vanilla"] and single["G"].iloc[0].startswith("75.0")
    assert {b.label for b in at.get("download_button")} >= {"Report (markdown)", "Report (csv)", "Report (latex)"}
    jobs = next(f for f in frames if "units" in f and "ETA" in f)
    assert list(jobs["status"]) == ["done"] and jobs["units"].iloc[0] == 40
    at.button(key="eval_exp_plan").click().run()  # the time estimate, from this home's measured run
    assert not at.error, [e.value for e in at.error]
    estimate = all_markdown(at)
    assert "endpoint\\-bound" in estimate and "app\\-bound" in estimate
    assert "measured from this home's job runs" in estimate


def test_k_above_one_at_temperature_zero_is_refused_on_the_page(env, runs):
    fake, _ = env
    at = open_page("evaluate", pair=PAIR)
    at.number_input(key="eval_temp_k2").set_value(0.0).run()  # k = 3 (the default) at temperature 0
    assert any("one sample asked 3 times" in e.value for e in at.error)
    assert "eval_judge" not in [b.key for b in at.button]  # no Judge button to press
    assert fake.requests == []
    at.number_input(key="eval_k").set_value(1).run()  # k = 1 at the judge role's temperature: offered
    assert not any("one sample asked" in e.value for e in at.error)
    at.button(key="eval_judge").click().run()
    assert not at.error and len(app_workspace().evals.judgments()) == 6
    assert {j.seed for j in app_workspace().evals.judgments()} == {0}
    assert {j.prompt_set for j in app_workspace().evals.judgments()} == {"mempal"}
