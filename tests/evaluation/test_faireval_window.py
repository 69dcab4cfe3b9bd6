"""A judge prompt is never cut: one too long for the judge's window is not sent and the judgment says why;
a reasoning judge's thinking is kept apart from its scores."""

from backends.config import ROLES, load_config
from backends.llm.fake import ScriptedLLM
from evaluation.faireval import judge_pair
from evaluation.service import topic_context
from tests.evaluation.conftest import MARKER, SAMPLE, TOPIC, USER, prefers_marker, store_run


def judge_with(env, demo, reply, window, prompts="compact"):
    """A k = 2 judgment with the compact wording (the window sizes below are measured against it)."""
    _, sims, ws = env
    fake = ScriptedLLM(reply, window=window)
    llm = ws.with_config(load_config(secrets={"cache": False}, env={})).llm(
        session_id="evalwin", providers=dict.fromkeys(ROLES, fake))
    runs = store_run(sims, "h2memory", MARKER), store_run(sims, "vanilla", "plain")
    return judge_pair(llm, topic_context(demo, USER, SAMPLE, TOPIC), *runs, "requirement", k=2,
                      prompts=prompts), fake, llm


def test_a_judge_prompt_too_long_for_the_window_is_recorded_invalid_and_never_sent(env, demo):
    j, fake, llm = judge_with(env, demo, prefers_marker, window=1200)
    assert fake.requests == []  # nothing cut, nothing sent
    assert j.decision == "invalid" and j.invalid == 4
    assert j.invalid_reason and "never cut" in j.invalid_reason and "1,200" in j.invalid_reason
    assert all(s.errors == [j.invalid_reason] for s in j.samples)
    assert j.prompt_tokens["order1"] > 1200 - 512 and j.token_counter.startswith("estimate:")
    assert j.context_window == 1200


def test_a_judge_prompt_that_fits_is_judged_and_counted(env, demo):
    j, fake, _ = judge_with(env, demo, prefers_marker, window=32000)
    assert len(fake.requests) == 4 and j.decision == "win" and j.invalid_reason is None
    assert 0 < j.prompt_tokens["order1"] < 32000


def test_reasoning_judges_keep_their_thinking_apart(env, demo):
    def thinking(req):
        return "<think>assistant-1 is worse, scores {\"assistant-1\": 1}</think>" + prefers_marker(req)

    j, _, _ = judge_with(env, demo, thinking, window=None)
    assert j.decision == "win" and all(s.ok for s in j.samples)
    assert all(s.reasoning and "assistant-1 is worse" in s.reasoning[0] for s in j.samples)
    assert all("think" not in s.raw[0] for s in j.samples)


def test_the_judges_own_budget_takes_what_the_window_leaves(env, demo):
    """An unset judge budget (8,192, at most half the window) would refuse a prompt that the old
    512 let through; it takes what the window leaves after the prompt instead, never less than 512 tokens."""
    from evaluation.faireval import MIN_JUDGE_ANSWER

    j, fake, llm = judge_with(env, demo, prefers_marker, window=2400)
    assert len(fake.requests) == 4 and j.decision == "win"
    budget = llm.budget("judge")
    assert budget.max_tokens == 1200  # half the window: the prompt alone would not fit with it
    sent = {r.max_tokens for r in fake.requests}
    assert all(MIN_JUDGE_ANSWER <= m < 1200 for m in sent)
    assert all(j.prompt_tokens["order1"] + m <= 2400 for m in sent)


def test_the_authors_prompt_that_does_not_fit_names_the_shorter_wording(env, demo):
    j, fake, _ = judge_with(env, demo, prefers_marker, window=2400, prompts="mempal")
    assert fake.requests == [] and j.decision == "invalid" and j.prompt_set == "mempal"
    assert j.invalid_reason and "--prompts compact" in j.invalid_reason
    compact, _, _ = judge_with(env, demo, prefers_marker, window=2400)  # the same window fits the compact wording
    assert compact.decision == "win"
