"""Each arm's interventions on a FairEval judgment: recorded when it is judged, derived from the stored runs for a
judgment made before, pooled over distinct runs, and the filter that keeps runs under a share."""

from __future__ import annotations

import pytest

from evaluation.faireval import judge_pair
from evaluation.faireval_interventions import pooled, under_share, with_interventions
from evaluation.service import topic_context
from palset.vocab import Act
from sim.decision import VerdictDecision, composed
from sim.prompting import load_role_prompt
from sim.types import Utterance
from tests.evaluation.conftest import MARKER, SAMPLE, TOPIC, USER, prefers_marker, store_run


def _add_composed_turn(sims, run_id: str) -> None:
    prompt = load_role_prompt("sim/user_decision", "en")
    text, fallback, decision = composed(prompt, VerdictDecision(accept=True, why=""), "en", [], "Megan")
    sims.add_utterance(run_id, Utterance(turn_no=2, side="user", actor="simulator", act=Act.SOLUTION_FEEDBACK,
                                         content=text, fallback=fallback, decision=decision, attempts=4,
                                         drafts_kept=True))


@pytest.fixture
def judged(demo, env):
    make_llm, sims, ws = env
    a, b = store_run(sims, "h2memory", MARKER), store_run(sims, "vanilla", "plain")
    _add_composed_turn(sims, a.run_id)
    a = sims.load(a.run_id)
    llm, _ = make_llm(prefers_marker)
    j = judge_pair(llm, topic_context(demo, USER, SAMPLE, TOPIC), a, b, "requirement", k=1)
    ws.evals.save_judgment(j)
    return ws.evals.load_judgment(j.judgment_key), sims


def test_a_judgment_records_each_arms_interventions_and_keeps_them_stored(judged):
    j, _ = judged
    a, b = j.interventions["a"], j.interventions["b"]
    assert (a.user_turns, a.composed, a.intervened) == (3, 1, 1) and a.composed_share == pytest.approx(1 / 3)
    assert (b.user_turns, b.composed, b.intervened) == (2, 0, 0) and b.composed_share == 0.0
    assert a.decisions == {"accept: yes": 1}


def test_a_judgment_made_before_gets_them_from_its_stored_runs_and_says_so(judged):
    j, sims = judged
    old = j.model_copy(update={"interventions": {}})
    (filled,), derived = with_interventions([old], sims.load)
    assert derived == 1 and filled.interventions["a"].composed == 1
    assert filled.interventions["b"].drafts_kept == 0 and filled.interventions["b"].user_turns == 2
    gone = old.model_copy(update={"run_b": "run-gone"})
    (unfilled,), derived = with_interventions([gone], sims.load)
    assert derived == 0 and unfilled.interventions == {}


def test_shares_pool_distinct_runs_and_the_filter_keeps_runs_under_a_share(judged):
    j, _ = judged
    other_aspect = j.model_copy(update={"aspect": "preference", "judgment_key": "other"})
    both = pooled([j, other_aspect])
    assert both["a"].user_turns == 3 and both["b"].user_turns == 2  # one run each, judged on two aspects
    assert under_share([j], "composed_share", 0.5) == ([j], 0)
    assert under_share([j], "composed_share", 0.2) == ([], 0)
    assert under_share([j], "intervention_share", 0.0) == ([], 0)
    assert under_share([j.model_copy(update={"interventions": {}})], "composed_share", 1.0) == ([], 1)
