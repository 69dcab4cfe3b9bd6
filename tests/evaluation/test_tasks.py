"""The single-turn tasks with a scripted LLM: selection scores and their bounds, schema rejections,
G-score mapping, BLEU against the right gold texts, and what each record keeps."""

import json

import pytest
from pydantic import ValidationError

from evaluation.service import bench_tasks, topic_context
from evaluation.tasks import GScoreOut, TopicTasks, g_report, s_report, selection_model, selection_score
from tests.evaluation.conftest import SAMPLE, TOPIC, USER

FEEDBACK = ["pos", "neg", "neu", "neu", "neg", "neu", "neu", "pos"]  # the demo topic's stored order


def test_selection_score_examples_and_bounds():
    assert selection_score(["S1", "S8"], FEEDBACK) == 2
    assert selection_score(["S1", "S2"], FEEDBACK) == 0
    assert selection_score(["S2", "S5"], FEEDBACK) == -2
    assert selection_score(["S3", "S8"], FEEDBACK) == 1
    assert s_report([2, 2]) == 100 and s_report([0, 0]) == 0 and s_report([-2, -2]) == -100
    with pytest.raises(ValueError):
        selection_score(["S1", "S1"], FEEDBACK)


def test_selection_schema_wants_two_distinct_known_ids():
    model = selection_model(8)
    assert model.model_validate({"analysis": "S2 and S7 fit", "choices": ["S2", "S7"]}).choices == ["S2", "S7"]
    for bad in (["S1", "S1"], ["S1"], ["S1", "S2", "S3"], ["S1", "S9"]):
        with pytest.raises(ValidationError):
            model.model_validate({"analysis": "x", "choices": bad})


def test_selection_schema_asks_for_the_analysis_before_the_choices():
    """The reference's {analysis, selected_solutions} — the reasoning comes first."""
    schema = selection_model(8).model_json_schema()
    assert list(schema["properties"]) == ["analysis", "choices"] and set(schema["required"]) == {"analysis", "choices"}
    with pytest.raises(ValidationError):
        selection_model(8).model_validate({"choices": ["S1", "S2"]})  # no analysis: rejected


def test_selection_prompt_asks_to_analyse_every_candidate_first(demo, env):
    (_, _, sel), ctx, fake = run_topic(demo, env, scripted(picks=("S1", "S8")))
    texts = [next(m.content for m in r.messages if m.role == "user") for r in fake.requests]
    text = next(t for t in texts if "# Candidate solutions" in t)
    n = len(ctx.topic.topic.candidate_solutions)
    assert f"all {n} candidates" in text and text.index('"analysis"') < text.index('"choices"')
    assert sel.analysis == "S1 and S8 fit this user" and sel.prompt_version == "3"


def test_g_score_values_and_report():
    assert GScoreOut.model_validate({"analysis": "x", "score": 1}).score == 1.0
    for bad in (0.7, 2.5, -0.5):
        with pytest.raises(ValidationError):
            GScoreOut.model_validate({"analysis": "x", "score": bad})
    assert g_report([2, 2]) == 100 and g_report([0.5, 1.5]) == 50 and g_report([0, 0]) == 0


def scripted(picks=("S1", "S8"), g=1.5, restated=None, proposed=None):
    """Replies by prompt: the G-score judge, restatement, proposal, selection."""
    def reply(req):
        text = "\n".join(m.content for m in req.messages)
        if "grade how well" in text:
            return json.dumps({"analysis": "matches one need", "score": g})
        if "Candidate solutions" in text:
            return json.dumps({"analysis": " and ".join(picks) + " fit this user", "choices": list(picks)})
        if "state in ONE sentence" in text:
            return json.dumps({"requirement": restated or "something"})
        return json.dumps({"solution": proposed or "something"})
    return reply


def run_topic(demo, env, reply):
    make_llm, _, _ = env
    llm, fake = make_llm(reply)
    ctx = topic_context(demo, USER, SAMPLE, TOPIC)
    return TopicTasks(llm, ctx, "vanilla", None, "demo").run(), ctx, fake


@pytest.mark.parametrize("picks,expected", [(("S1", "S8"), 2), (("S1", "S2"), 0), (("S2", "S5"), -2)])
def test_selection_task_scores_the_picks(demo, env, picks, expected):
    (_, _, sel), _, _ = run_topic(demo, env, scripted(picks=picks))
    assert sel.ok and sel.picks == list(picks) and sel.s_score == expected


def test_duplicate_picks_are_rejected_and_scored_zero(demo, env):
    (_, _, sel), _, fake = run_topic(demo, env, scripted(picks=("S1", "S1")))
    assert not sel.ok and sel.s_score == 0 and len(sel.raw) == 3 and "DIFFERENT" in " ".join(sel.errors)


def test_restatement_and_proposal_bleu_against_gold(demo, env):
    ctx = topic_context(demo, USER, SAMPLE, TOPIC)
    t = ctx.topic.topic
    (res, prop, _), _, _ = run_topic(demo, env, scripted(restated=t.requirement, proposed=t.solution.pos[1]))
    assert res.bleu[4] == pytest.approx(1.0) and res.g_score == 1.5 and res.g_ok and res.g_analysis
    assert prop.bleu[4] == pytest.approx(1.0)  # the max over the two positive solutions
    assert res.prompt_name == "eval/requirement_restatement" and res.prompt_version and res.model
    assert res.raw and res.judge_model and res.g_prompt_version


def test_a_failed_g_score_judge_has_no_score(demo, env):
    """A failed judge call is not a zero — it leaves the mean (see test_aggregate)."""
    (res, _, _), _, _ = run_topic(demo, env, scripted(g=0.7))
    assert res.g_ok is False and res.g_score is None and len(res.g_raw) == 3
    assert res.ok and res.prediction  # the prediction itself was fine


def test_bench_tasks_resume_from_the_store(demo, env):
    make_llm, _, ws = env
    store = ws.evals
    llm, fake = make_llm(scripted())
    first = bench_tasks(llm, demo, ["vanilla"], store, ws.open_builder, users=[USER])
    topics = sum(len(s.topics) for s in demo.users[USER].query)
    assert len(first) == 3 * topics and len(fake.requests) == 4 * topics
    llm2, fake2 = make_llm(scripted())
    again = bench_tasks(llm2, demo, ["vanilla"], store, ws.open_builder, users=[USER])
    assert fake2.requests == [] and [r.result_key for r in again] == [r.result_key for r in first]
