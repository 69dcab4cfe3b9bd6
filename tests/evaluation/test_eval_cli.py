"""`pal judge` and `pal bench-tasks` in-process, with a scripted LLM and runs stored in the simulation store."""

import json

import pytest

from cli import eval_cmds
from cli.main import main
from tests.conftest import DEMO
from tests.evaluation.conftest import MARKER, SAMPLE, USER, prefers_marker, store_run
from tests.evaluation.test_tasks import scripted


@pytest.fixture
def cli_llm(env, monkeypatch):
    """Point the commands at a scripted LLM; returns a setter for the reply function and the request log."""
    make_llm, _, _ = env
    log: list = []

    def use(reply):
        def factory():
            llm, fake = make_llm(reply)
            log.append(fake)
            return llm
        monkeypatch.setattr(eval_cmds, "make_llm", factory)
    return use, log


def test_pal_judge_pairs_runs_judges_and_resumes(env, cli_llm, capsys):
    _, sims, _ = env
    use, log = cli_llm
    for topic in ("topic-1", "topic-2"):
        store_run(sims, "h2memory", MARKER, topic=topic)
        store_run(sims, "vanilla", "plain", topic=topic)
    store_run(sims, "h2memory", MARKER, sample="1000_sample8")  # no baseline run: not paired
    use(prefers_marker)
    argv = ["judge", "--dataset", str(DEMO), "--runs", "h2memory", "--baseline", "vanilla", "--k", "1", "--json"]
    assert main([*argv, "--task-ids", f"{SAMPLE}_topic-2,1000_sample8_topic-1"]) == 0  # only the topics named
    assert [(r["aspect"], r["win"]) for r in json.loads(capsys.readouterr().out)] == [("preference", 1),
                                                                                     ("requirement", 1)]
    assert len(log[-1].requests) == 4  # one topic, two aspects, both orders
    assert main(argv) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)
    assert [(r["aspect"], r["win"], r["tie"], r["lose"]) for r in rows] == [("preference", 2, 0, 0),
                                                                            ("requirement", 2, 0, 0)]
    assert rows[0]["adjusted_win_rate"] == 1.0 and rows[0]["flip_rate"] == 0.0
    assert len(log[-1].requests) == 4  # the other topic; the one judged before is stored
    assert main(argv[:-1]) == 0  # resumed: nothing judged again, table printed
    out, err = capsys.readouterr()
    assert len(log[-1].requests) == 0 and "stored" in err and "h2memory vs vanilla" in out


def test_pal_judge_without_pairs_and_bad_args(env, cli_llm, capsys):
    use, _ = cli_llm
    use(prefers_marker)
    base = ["judge", "--dataset", str(DEMO), "--runs", "h2memory", "--baseline", "vanilla"]
    assert main(base) == 2
    assert main([*base, "--aspects", "style"]) == 2
    assert "error" in capsys.readouterr().err


def test_pal_bench_tasks_prints_a_leaderboard(env, cli_llm, capsys):
    use, _ = cli_llm
    use(scripted())
    assert main(["bench-tasks", "--dataset", str(DEMO), "--methods", "vanilla", "--users", USER, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["method"] == "vanilla" and -100 <= row["s_score"]["value"] <= 100 and row["g_score"]["value"] == 75.0
    assert row["s_score"]["n"] == row["g_score"]["n"] > 0 and row["selection_invalid"] == 0
    assert main(["bench-tasks", "--dataset", str(DEMO), "--methods", "vanilla", "--users", USER]) == 0  # resumed
    assert "vanilla" in capsys.readouterr().out
    assert main(["bench-tasks", "--dataset", str(DEMO), "--methods", "nope"]) == 2
    assert main(["bench-tasks", "--dataset", str(DEMO), "--methods", "conditionmem"]) == 2
    assert "not implemented — conditionmem: ConditionMem" in capsys.readouterr().err


def test_pal_judge_shows_dropped_topics_and_sends_the_uncertain_ones_to_review(env, cli_llm, capsys):
    """A failed simulation's topic is listed as dropped, not lost."""

    _, sims, ws = env
    use, _ = cli_llm
    for topic in ("topic-1", "topic-2"):
        store_run(sims, "h2memory", MARKER, topic=topic)
        store_run(sims, "vanilla", "plain", topic=topic)
    failed = store_run(sims, "vanilla", "plain", sample="1000_sample8")
    sims.set_status(failed.run_id, "failed", "user simulator, turn 2: no usable utterance after 3 tries")
    store_run(sims, "h2memory", MARKER, sample="1000_sample8")
    use(prefers_marker)
    argv = ["judge", "--dataset", str(DEMO), "--runs", "h2memory", "--baseline", "vanilla", "--k", "1"]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(r["dropped"] == 1 and r["invalid"] == 0 for r in rows)
    assert rows[0]["metric_versions"] == "faireval_decision=2;faireval_summary=2;length_bias=1"
    assert main([*argv, "--review-uncertain", "1", "--annotators", "ann1,ann2"]) == 0
    out, err = capsys.readouterr()
    assert "dropped 1000 1000_sample8 topic-1: vanilla: failed (user simulator, turn 2: no usable" in out
    assert "drop" in out.splitlines()[0] and "review batch b-" in err and "most uncertain of 2 topic(s)" in err
    (batch,) = ws.reviews.batches()
    assert batch["task"] == "pairwise" and batch["data"]["calibration"]["methods"] == ["h2memory", "vanilla"]
    assert len(ws.reviews.items(batch["batch_id"])) == 1 and batch["overlap"] == 2
    # audit findings 5 and 19: the batch seed was 0 (A/B order = sha256("0:<topic>"), which an annotator can work out
    # from the item) and the batch was neither audited nor credited to whoever made it
    assert batch["seed"] != 0 and batch["created_by"].startswith("cli")
    entry = ws.audit.entries(action="review.batch_create")[0]
    assert entry.target == batch["batch_id"] and entry.detail["calibration"] and entry.actor.startswith("cli")
    assert main([*argv, "--review-uncertain", "1", "--annotators", "ann1,ann2", "--review-seed", "7"]) == 0
    assert {b["seed"] for b in ws.reviews.batches()} >= {7}
    assert main([*argv, "--review-uncertain", "2"]) == 2  # no annotators named


def test_pal_bench_tasks_table_names_the_bleu_tokens_and_judge_failures(env, cli_llm, capsys):
    use, _ = cli_llm
    use(scripted(g=0.7))  # every G-score judge reply is invalid
    assert main(["bench-tasks", "--dataset", str(DEMO), "--methods", "vanilla", "--users", USER]) == 0
    out = capsys.readouterr().out
    assert "G judge failed" in out and "English with word tokens" in out and "g_score=2" in out
    assert main(["bench-tasks", "--dataset", str(DEMO), "--methods", "vanilla", "--users", USER, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["g_judge_failed"] == row["s_score"]["n"] > 0 and row["g_score"]["n"] == 0


def test_review_uncertain_judges_at_fairevals_temperature_and_redecides_stored_judgments(env, cli_llm, capsys):
    """--review-uncertain samples the judge at T = 1 unless told otherwise (a new
    judgment, the T = 0 one kept), and ranks stored judgments re-decided under the current rules — a judgment
    stored with a v1 decision ("win" from pooled samples, one order without a valid sample) is invalid now and
    ranks first, as on the Evaluate page."""
    from evaluation.faireval import judgment_key

    _, sims, ws = env
    use, log = cli_llm
    for topic in ("topic-1", "topic-2"):
        store_run(sims, "h2memory", MARKER, topic=topic)
        store_run(sims, "vanilla", "plain", topic=topic)
    use(prefers_marker)
    argv = ["judge", "--dataset", str(DEMO), "--runs", "h2memory", "--baseline", "vanilla", "--k", "1",
            "--aspects", "requirement"]
    assert main([*argv, "--json"]) == 0
    cold = ws.evals.judgments()
    assert len(cold) == 2 and {j.sampling_temperature for j in cold} == {None} and {j.judge_temperature for j in cold} == {0.0}
    # make topic-2's stored judgment a v1 record: order 2 failed, decision "win" as v1 pooled it
    j = next(x for x in cold if x.topic_key == "topic-2")
    broken = j.model_copy(update={"samples": [s if s.order == 1 else s.model_copy(update={"ok": False, "score_a": None,
                                                                                        "score_b": None})
                                              for s in j.samples], "decision": "win", "decision_version": "1"})
    ws.evals.save_judgment(broken)
    assert main([*argv, "--temperature", "3"]) == 2
    capsys.readouterr()
    assert main([*argv, "--review-uncertain", "1", "--annotators", "ann1,ann2", "--seed", "4"]) == 0
    out, err = capsys.readouterr()
    assert "at temperature 1" in err and "seeded random order, --seed 4" in err and len(log[-1].requests) == 4
    hot = [x for x in ws.evals.judgments() if x.sampling_temperature == 1.0]
    assert len(hot) == 2 and all(x.judge_temperature == 1.0 for x in hot)
    assert {x.judgment_key for x in hot} == {judgment_key(x.run_a, x.run_b, x.aspect, 1, x.judge_model,
                                                          x.prompt_version, 1.0, x.prompt_name, 0) for x in hot}
    assert all(r.temperature == 1.0 for r in log[-1].requests)
    # the same review, over the stored T = 0 judgments, re-decides the broken one and sends it
    assert main([*argv, "--review-uncertain", "1", "--annotators", "ann1,ann2", "--temperature", "0"]) == 0
    err = capsys.readouterr().err
    assert "warning: judged at temperature 0" in err
    batch = ws.reviews.batches()[0]
    assert list(batch["data"]["calibration"]["uncertainty"]) == ["1000/1000_sample7/topic-2"]


def test_pal_judge_refuses_k_above_one_at_temperature_zero_and_names_its_settings(env, cli_llm, capsys):
    _, sims, ws = env
    use, _ = cli_llm
    store_run(sims, "h2memory", MARKER)
    store_run(sims, "vanilla", "plain")
    use(prefers_marker)
    argv = ["judge", "--dataset", str(DEMO), "--runs", "h2memory", "--baseline", "vanilla", "--aspects", "requirement"]
    assert main([*argv, "--temperature", "0"]) == 2
    assert "one sample asked 3 times" in capsys.readouterr().err and ws.evals.judgments() == []
    assert main([*argv, "--prompts", "nonsense"]) == 2
    assert "unknown judge prompt set 'nonsense'" in capsys.readouterr().err
    assert main([*argv, "--judge-seed", "7"]) == 0
    out, err = capsys.readouterr()
    assert "k=3 per order at temperature 1, seed 7, prompts Mem-PAL authors' judge prompt" in err
    assert "consist" in out and "pos.dec" in out and "of all 1 topic(s)" in out
    (j,) = ws.evals.judgments()
    assert (j.k, j.sampling_temperature, j.seed, j.prompt_set) == (3, 1.0, 7, "mempal")
