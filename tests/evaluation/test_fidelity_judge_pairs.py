"""The judge matcher measured on the calibration pairs, over a scripted judge: each matched and hard-negative pair is
asked once with the requirement as the fact and the other text as the memory's line; precision, TPR and false
matches are counted from the verdicts by hand; an invalid answer or a failed call is counted, never a match."""

from __future__ import annotations

import json

import pytest

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from evaluation.fidelity.judge_pairs import judge_pairs, sample_pairs
from evaluation.fidelity.threshold import HARD, Pair
from testkit.requests import prompt_text
from testkit.workspace import make_workspace

PAIRS = [Pair("u1", "req A", "need A1", True, "matched"), Pair("u1", "req A", "need A2", True, "matched"),
         Pair("u1", "req A", "need B1", False, HARD), Pair("u1", "req A", "other user's need", False, "other user"),
         Pair("u2", "req C", "need C1", True, "matched"), Pair("u2", "req C", "need D1", False, HARD)]


def _llm(tmp_path, reply):
    fake = ScriptedLLM(reply)
    return fake, make_workspace(tmp_path).llm(session_id="test", providers=dict.fromkeys(ROLES, fake))


def _line(req) -> str:
    return prompt_text(req).rsplit("- ", 1)[1].splitlines()[0].strip()


def test_precision_tpr_and_false_matches_come_from_the_verdicts(tmp_path):
    said = {"need A1": "stated", "need A2": "absent", "need B1": "stated", "need C1": "stated", "need D1": "no json"}

    def reply(req):
        verdict = said[_line(req)]
        return verdict if verdict == "no json" else json.dumps({"analysis": "read", "verdict": verdict})

    fake, llm = _llm(tmp_path, reply)
    score = judge_pairs(llm, PAIRS)
    asked = [_line(r) for r in fake.requests]
    assert "other user's need" not in asked and set(asked) == set(said)  # only matched and hard pairs are judged
    assert all("req A" in prompt_text(r) or "req C" in prompt_text(r) for r in fake.requests)
    assert (score.matched, score.hard_negatives) == (3, 2)
    assert (score.true_matches, score.false_matches, score.invalid) == (2, 1, 1)
    assert score.precision == pytest.approx(2 / 3) and score.tpr == pytest.approx(2 / 3)
    assert score.hard_fpr == pytest.approx(1 / 2) and not score.reaches
    assert {v["line"]: v["verdict"] for v in score.verdicts}["need D1"] == "invalid"


def test_a_judge_that_tells_needs_apart_reaches_the_bar(tmp_path):
    _fake, llm = _llm(tmp_path, lambda req: json.dumps(
        {"analysis": "read", "verdict": "stated" if _line(req) in ("need A1", "need A2", "need C1") else "absent"}))
    score = judge_pairs(llm, PAIRS)
    assert score.precision == 1.0 and score.tpr == 1.0 and score.hard_fpr == 0.0 and score.reaches
    assert score.report()["precision"] == 1.0  # the figures travel in the JSON output


def test_a_failed_call_is_counted_invalid_and_the_rest_are_judged(tmp_path):
    def reply(req):
        if _line(req) == "need A1":
            raise ConnectionError("endpoint down")
        return json.dumps({"analysis": "read", "verdict": "stated"})

    _fake, llm = _llm(tmp_path, reply)
    score = judge_pairs(llm, PAIRS)
    assert score.invalid >= 1 and score.true_matches == 2 and score.false_matches == 2


def test_the_sample_keeps_at_most_n_of_each_kind_and_is_the_same_for_a_seed():
    many = [Pair("u", "r", f"m{i}", True, "matched") for i in range(10)] + \
           [Pair("u", "r", f"h{i}", False, HARD) for i in range(10)] + [Pair("u", "r", "x", False, "other user")]
    first = sample_pairs(many, 3, seed=1)
    assert sorted(p.kind for p in first) == ["matched"] * 3 + [HARD] * 3
    assert first == sample_pairs(many, 3, seed=1) and sample_pairs(many, None) == many[:20]
