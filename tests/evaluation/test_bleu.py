"""BLEU as the paper computes it: hand-computed values, jieba for Chinese, word tokens for English,
smoothing for missing n-grams, the .33 BLEU-3 weights and the per-n max for generation.

The spec's sanity vector (BLEU-1 0.2143 … BLEU-4 0.0076) comes from an example sentence pair in the
paper's ``metrics.py`` that the spec does not reproduce, so it cannot be checked here.
"""

import math

import pytest

from evaluation.bleu import WEIGHTS, bleu, bleu_max, is_chinese, tokenize

REF = "the cat sat on the mat"


def test_identical_text_scores_one():
    assert bleu(REF, REF) == pytest.approx({1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0})


def test_hand_computed_values_with_method1_smoothing_and_33_weights():
    s = bleu(REF, "the cat is on the mat")
    p1, p2, p3 = 5 / 6, 3 / 5, 1 / 4
    p4 = 0.1 / 3  # method1: no 4-gram match → epsilon 0.1 over the 3 hypothesis 4-grams
    assert s[1] == pytest.approx(p1)
    assert s[2] == pytest.approx(math.sqrt(p1 * p2))
    assert s[3] == pytest.approx(math.exp(0.33 * (math.log(p1) + math.log(p2) + math.log(p3))))
    assert s[3] != pytest.approx((p1 * p2 * p3) ** (1 / 3), abs=1e-4)  # .33, not 1/3, as the paper
    assert s[4] == pytest.approx(math.exp(0.25 * sum(map(math.log, (p1, p2, p3, p4)))))
    assert WEIGHTS[3] == (0.33, 0.33, 0.33)


def test_brevity_penalty_and_no_overlap():
    short = bleu(REF, "the cat")
    assert short[1] == pytest.approx(math.exp(1 - 6 / 2))  # precision 1, BP = e^(1 - r/c)
    zero = bleu(REF, "dogs bark loudly")
    assert zero[1] == 0.0 and all(0 <= v < 1e-3 for v in zero.values())
    assert bleu(REF, "") == dict.fromkeys(WEIGHTS, 0.0)


def test_english_tokens_are_lowercased_words_and_punctuation():
    assert tokenize("Book the 7:30 train, please!") == ["book", "the", "7", ":", "30", "train", ",", "please", "!"]
    assert bleu(REF, "The Cat sat on the MAT") == pytest.approx(bleu(REF, REF))


def test_chinese_uses_jieba_words():
    assert not is_chinese("Lisa wants 周末 plans for the kids")
    assert is_chinese("我想找一个周末可以带孩子去的地方")
    tokens = tokenize("我想找一个周末可以带孩子去的地方")
    assert "周末" in tokens and "孩子" in tokens and len(tokens) < 15  # words, not characters
    s = bleu("我想找一个周末可以带孩子去的地方", "周末带孩子去哪里")
    assert 0 < s[4] <= s[3] <= s[2] <= s[1] < 1


def test_generation_takes_the_max_separately_per_n():
    refs = ["the cat sat on the mat", "a cat is on a mat"]
    hyp = "a cat is on the mat"
    per_ref = [bleu(r, hyp) for r in refs]
    best = bleu_max(refs, hyp)
    assert best == {n: max(p[n] for p in per_ref) for n in WEIGHTS}
    assert bleu_max([], hyp) == dict.fromkeys(WEIGHTS, 0.0)


def test_reproduces_the_spec_sanity_vector():
    """The example pair of the authors' metrics.py (a fact quoted as test data); expected values from the spec §4.1."""
    from evaluation.bleu import bleu

    reference = "用户需要一种既能满足工作需求又能持续改善健康状况的综合计划，重点在于如何在不影响职业发展的前提下逐步建立健康的生活习惯。"
    candidate = ("用户希望获得一个全面的健康管理方案，包括饮食调整、适合当前身体状况的运动建议以及有效的压力管理方法，"
                 "以帮助其在忙碌的工作生活中保持良好的身体和精神状态。")
    scores = bleu(reference, candidate)
    assert [round(scores[n], 4) for n in (1, 2, 3, 4)] == [0.2143, 0.0229, 0.0114, 0.0076]
