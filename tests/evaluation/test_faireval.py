"""FairEval with a scripted judge: position bias cancels, real preference wins in both orders, invalid
outputs are retried then recorded, records are complete, thresholds make ties, stored judgments are skipped."""

from fractions import Fraction

import pytest

from backends.prompts import load_prompt
from evaluation.faireval import (
    FAIREVAL_TEMPERATURE,
    FairEvalSettingsError,
    JudgeSample,
    apply_decision,
    decide,
    judge_pair,
    judgment_key,
    order_means,
    render_dialogue,
    sampling_temperature,
    stored_key,
)
from evaluation.service import judge_runs, pair_runs, topic_context
from palset.dataset import dataset_key
from tests.conftest import DEMO
from tests.evaluation.conftest import (
    MARKER,
    SAMPLE,
    TOPIC,
    USER,
    judge_reply,
    prefers_first,
    prefers_marker,
    slots,
    store_run,
)


@pytest.fixture
def runs(env):
    _, sims, _ = env
    return store_run(sims, "h2memory", MARKER), store_run(sims, "vanilla", "plain")


def judge(demo, env, runs, reply, aspect="requirement", **kw):
    make_llm, _, _ = env
    llm, fake = make_llm(reply)
    ctx = topic_context(demo, USER, SAMPLE, TOPIC)
    return judge_pair(llm, ctx, runs[0], runs[1], aspect, **kw), fake


def test_position_bias_alone_gives_a_tie(demo, env, runs):
    j, fake = judge(demo, env, runs, prefers_first)
    assert len(fake.requests) == 6  # k=3 per order, each a real call (salted per sample)
    assert j.decision == "tie" and j.mean_a == j.mean_b == 6.5
    assert j.flipped and j.order1_winner == "A" and j.order2_winner == "B"
    assert j.slot1_preference == 1.0


def test_a_real_preference_wins_in_both_orders(demo, env, runs):
    j, fake = judge(demo, env, runs, prefers_marker)
    assert j.decision == "win" and j.mean_a == 9 and j.mean_b == 4
    assert not j.flipped and j.order1_winner == j.order2_winner == "A"
    assert j.slot1_preference == 0.5
    firsts = [MARKER in slots(r)[0] for r in fake.requests]
    assert firsts.count(True) == 3 and firsts.count(False) == 3  # the dialogues really were swapped


def test_record_keeps_both_orders_and_every_sample(demo, env, runs):
    j, _ = judge(demo, env, runs, prefers_marker, aspect="preference", k=2)
    a, b = render_dialogue(runs[0], quoted=True), render_dialogue(runs[1], quoted=True)
    assert a.startswith('- "user": "') and '- "assistant": "' in a  # as the authors' perform_evaluation.py writes
    assert j.texts["order1"].assistant_1 == a and j.texts["order1"].assistant_2 == b
    assert j.texts["order2"].assistant_1 == b and j.texts["order2"].assistant_2 == a
    assert [(s.order, s.index) for s in j.samples] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert all(s.ok and s.raw and s.analysis["overall"] == "o" for s in j.samples)
    assert j.k == 2 and j.aspect == "preference" and j.prompt_name == "eval/faireval_mempal_preference"
    assert j.prompt_set == "mempal" and j.prompt_version and j.judge_model
    assert j.judge_temperature == j.sampling_temperature == 1.0  # k > 1: FairEval's temperature, not the role's 0
    assert (j.method_a, j.method_b, j.run_a, j.run_b) == ("h2memory", "vanilla", runs[0].run_id, runs[1].run_id)


def test_judge_prompt_has_the_ground_truth_and_order_warning(demo, env, runs):
    _, fake = judge(demo, env, runs, prefers_first, k=1, prompts="compact")
    system, text = fake.requests[0].messages[0].content, fake.requests[0].messages[-1].content
    topic = topic_context(demo, USER, SAMPLE, TOPIC).topic.topic
    assert topic.implicit_needs[0] in text and topic.requirement in text and "random order" in text
    assert "Personality" in system  # the user's profile: shared by every call of the topic, so it comes first
    assert text.index(topic.requirement) < text.index("assistant-1") < text.index("How to judge")


def test_malformed_outputs_are_retried_then_recorded_invalid(demo, env, runs):
    replies = iter(["not json", judge_reply(7, 3)] + ["{oops"] * 3 + [judge_reply(11, 2)] * 3 + [judge_reply(5, 5)] * 20)
    j, fake = judge(demo, env, runs, lambda req: next(replies), k=3)
    first, second, third = j.samples[:3]
    assert first.ok and first.attempts == 2 and first.score_a == 7
    assert not second.ok and len(second.raw) == 3 and second.errors
    assert not third.ok  # score 11 is outside 1..10
    assert j.invalid == 2 and j.decision == "win"  # each order's valid samples, then the two orders
    assert j.mean_a == pytest.approx((7 + 5) / 2) and j.mean_b == pytest.approx((3 + 5) / 2)


def test_all_invalid_gives_an_invalid_decision(demo, env, runs):
    j, _ = judge(demo, env, runs, lambda req: "no", k=1)
    assert j.decision == "invalid" and j.invalid == 2 and j.mean_a is None


def test_threshold_turns_small_differences_into_ties(demo, env, runs):
    j, _ = judge(demo, env, runs, lambda req: judge_reply(7, 6) if MARKER in slots(req)[0] else judge_reply(6, 7))
    assert j.decision == "win"
    assert apply_decision(j, 1.0).decision == "tie"
    assert apply_decision(j, 0.5).decision == "win"


def test_resume_skips_stored_judgments(demo, env, runs):
    make_llm, sims, ws = env
    store = ws.evals
    pairs = pair_runs(sims, dataset_key(DEMO), "h2memory", "vanilla")
    assert [(p.run_a, p.run_b) for p in pairs] == [(runs[0].run_id, runs[1].run_id)]
    llm, fake = make_llm(prefers_marker)
    first = judge_runs(llm, demo, sims, store, pairs, ["requirement", "preference"], k=2)
    assert len(fake.requests) == 8 and len(store.judgments()) == 2
    llm2, fake2 = make_llm(prefers_first)
    again = judge_runs(llm2, demo, sims, store, pairs, ["requirement", "preference"], k=2)
    assert fake2.requests == [] and [j.decision for j in again] == [j.decision for j in first] == ["win", "win"]
    llm3, fake3 = make_llm(prefers_first)
    judge_runs(llm3, demo, sims, store, pairs, ["requirement"], k=3)  # a different k is a new judgment
    assert len(store.judgments()) == 3
    assert len(fake3.requests) == 2  # samples 0-1 of each order come from the response cache, sample 2 is new


# ---------------------------------------------------------------- equal weight per order


def sample(order: int, index: int, a: int | None = None, b: int | None = None) -> JudgeSample:
    """A judge sample with method A's and B's scores (None: an invalid sample)."""
    if a is None:
        return JudgeSample(order=order, index=index, ok=False, errors=["invalid output"])
    s1, s2 = (a, b) if order == 1 else (b, a)
    return JudgeSample(order=order, index=index, ok=True, slot1=s1, slot2=s2, score_a=a, score_b=b)


ORDER1_8_VS_6 = [sample(1, i, 8, 6) for i in range(3)]


def test_one_valid_sample_in_order_two_weighs_as_much_as_order_one():
    """Order 1 gives 8 vs 6 three times, order 2 one valid 5 vs 7: averaged per sample that would be a "win";
    with equal weight per order it is a tie."""
    samples = ORDER1_8_VS_6 + [sample(2, 0, 5, 7), sample(2, 1), sample(2, 2)]
    assert decide(samples) == ("tie", 6.5, 6.5)


def test_order_two_all_invalid_makes_the_judgment_invalid():
    """Order 2 all invalid: averaged per sample that would still be a "win"; it is invalid (no position balance)."""
    samples = ORDER1_8_VS_6 + [sample(2, i) for i in range(3)]
    assert decide(samples) == ("invalid", None, None)
    assert decide([sample(1, i) for i in range(3)] + [sample(2, i, 8, 6) for i in range(3)])[0] == "invalid"


def test_order_means_are_exact_so_equal_means_tie():
    # 1/3-step means that a float sum could round apart: (7+8+8)/3 + (8+8+7)/3 vs (8+7+8)/3 + (8+7+8)/3
    samples = [sample(1, 0, 7, 8), sample(1, 1, 8, 7), sample(1, 2, 8, 8),
               sample(2, 0, 8, 8), sample(2, 1, 8, 7), sample(2, 2, 7, 8)]
    assert decide(samples)[0] == "tie"
    means = order_means(samples)
    assert means[1] == (Fraction(23, 3), Fraction(23, 3)) and means[2] == (Fraction(23, 3), Fraction(23, 3))


def test_invalid_items_are_counted_next_to_win_tie_lose():
    from evaluation.aggregate import aggregate_judgments
    from tests.evaluation.test_aggregate import judgment

    rows = aggregate_judgments([judgment("u", "t1", [(1, 8, 5), (2, 8, 5)]), judgment("u", "t2", [(1, 8, 6)]),
                                judgment("u", "t3", [(1, 8, 6), (1, 8, 6), (2, 5, 7)])], n_boot=50)
    (row,) = rows
    assert (row["win"], row["tie"], row["lose"], row["invalid"], row["n"]) == (1, 1, 0, 1, 2)
    assert row["decision_version"] == "2"


def test_samples_in_flight_together_give_the_judgment_one_by_one_gives(demo, env, runs, tmp_path):
    from backends.config import ROLES
    from backends.llm.fake import ScriptedLLM
    from testkit.workspace import make_workspace

    def reply(req):  # depends on the request alone: which dialogue comes first
        return prefers_marker(req)

    one_by_one, _ = judge(demo, env, runs, reply)
    fake = ScriptedLLM(reply, slots=8, latency=0.3)  # long enough that every sample is asked before one is answered
    llm = make_workspace(tmp_path / "other").llm(providers=dict.fromkeys(ROLES, fake))  # its own response cache
    together = judge_pair(llm, topic_context(demo, USER, SAMPLE, TOPIC), runs[0], runs[1], "requirement", k=3)
    assert fake.max_in_flight == 6  # both orders × k samples at once on an 8-slot endpoint
    keep = {"created_at"}
    assert together.model_dump(exclude=keep) == one_by_one.model_dump(exclude=keep)
    assert [(s.order, s.index) for s in together.samples] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]


# ---------------------------------------------------------------- sampling as FairEval does, the authors' prompts


def test_k_above_one_samples_at_fairevals_temperature_each_with_its_own_recorded_seed(demo, env, runs):
    j, fake = judge(demo, env, runs, prefers_marker, k=3, seed=40)
    assert {r.temperature for r in fake.requests} == {1.0} and j.sampling_temperature == 1.0
    assert j.seed == 40 and sorted(r.seed for r in fake.requests) == [40, 41, 42, 43, 44, 45]
    assert [(s.order, s.index, s.seed) for s in j.samples] == [(1, 0, 40), (1, 1, 41), (1, 2, 42), (2, 0, 43),
                                                              (2, 1, 44), (2, 2, 45)]
    assert j.judgment_key == stored_key(j)
    one, fake_one = judge(demo, env, runs, prefers_marker, k=1)
    assert one.sampling_temperature is None and {r.temperature for r in fake_one.requests} == {0.0}  # the role's
    assert one.seed is None and {r.seed for r in fake_one.requests} == {None}


def test_k_above_one_at_temperature_zero_is_refused_before_anything_is_sent(demo, env, runs):
    with pytest.raises(FairEvalSettingsError, match="one sample asked 3 times"):
        judge(demo, env, runs, prefers_marker, k=3, temperature=0.0)
    assert sampling_temperature(1, 0.0) == 0.0 and sampling_temperature(2, None) == FAIREVAL_TEMPERATURE
    assert sampling_temperature(3, 0.7) == 0.7 and sampling_temperature(1, None) is None


def test_english_users_get_the_authors_prompt_in_english_with_their_json_ground_truth(demo, env, runs):
    j, fake = judge(demo, env, runs, prefers_marker, k=1)
    system, text = fake.requests[0].messages[0].content, fake.requests[0].messages[-1].content
    assert j.prompt_name == "eval/faireval_mempal_requirement" and j.prompt_set == "mempal"
    assert system.startswith("You are an excellent dialogue evaluator.")  # the authors' Appendix English
    needs = topic_context(demo, USER, SAMPLE, TOPIC).needs_with_evidence()
    assert '"implicit_needs": [' in text and f'"{{"need": "{needs[0][0]}"' in text  # one-line JSON, as get_prompt
    assert '"Openness"' in text and '"health status"' in text  # personality and background as JSON
    assert "randomly assigned to the two specific assistants" in text  # their order warning, rule 2
    assert '- "assistant": "' in text  # utterances quoted as perform_evaluation.py writes them


def test_chinese_users_get_the_authors_chinese_original_verbatim(demo, env):
    from tests.evaluation.conftest import store_run

    make_llm, sims, _ = env
    user = demo.users["1006"]
    session = user.query[0]
    topic = session.topics[0].key
    ra = store_run(sims, "h2memory", MARKER, user="1006", sample=session.sample_id, topic=topic)
    rb = store_run(sims, "vanilla", "plain", user="1006", sample=session.sample_id, topic=topic)
    llm, fake = make_llm(prefers_marker)
    j = judge_pair(llm, topic_context(demo, "1006", session.sample_id, topic), ra, rb, "preference", k=1)
    assert j.prompt_name == "eval/faireval_mempal_preference.zh" and j.decision == "win"
    system, text = fake.requests[0].messages[0].content, fake.requests[0].messages[-1].content
    original = load_prompt("eval/faireval_mempal_preference.zh")
    assert system == original.part("system")
    assert text.startswith("现在给你交互用户") and "# 当前评价维度：偏好理解" in text and '"pos_list": [' in text
    compact = judge_pair(llm, topic_context(demo, "1006", session.sample_id, topic), ra, rb, "preference", k=1,
                         prompts="compact")
    assert compact.prompt_name == "eval/faireval_preference" and compact.judgment_key != j.judgment_key


def test_judgments_made_before_the_choice_keep_their_keys():
    """The compact prompt's judgments (the only wording before) and judgments without a seed keep their old key."""
    old = judgment_key("ra", "rb", "requirement", 3, "m", "2", None)
    assert judgment_key("ra", "rb", "requirement", 3, "m", "2", None, "eval/faireval_requirement", None) == old
    assert judgment_key("ra", "rb", "requirement", 3, "m", "2", None, "eval/faireval_mempal_requirement") != old
    assert judgment_key("ra", "rb", "requirement", 3, "m", "2", None, None, 0) != old


def test_a_bundle_re_keys_a_seeded_judgment_of_the_authors_prompt_to_the_key_it_was_stored_under(demo, env, runs):
    import json

    from studio.bundle.kinds import _judgment_key

    j, _ = judge(demo, env, runs, prefers_marker, k=2, seed=9)
    row = {"run_a": j.run_a, "run_b": j.run_b, "aspect": j.aspect, "k": j.k, "judge_model": j.judge_model,
           "prompt_version": j.prompt_version, "data": json.dumps(j.model_dump(mode="json"))}
    assert _judgment_key(row) == j.judgment_key == stored_key(j)
