"""A synthetic user generated with several situations and topics per month by the real bundled model, on a
server whose slots give each request only 2,048 tokens (ctx 4096 / parallel 2): no request ever exceeds the
slot's window (by the server's own prompt count + the max_tokens sent), and nothing fails at the endpoint.

Counts are small (one month, 3 situations, up to 2 topics each, 4–6 logs) to keep it short on a shared CPU;
the small window makes the fitting bite anyway."""

from __future__ import annotations

import time

import pytest

from synth.config import SynthConfig
from synth.pipeline import Pipeline
from testkit.workspace import make_workspace

pytestmark = pytest.mark.slow


def test_a_generated_user_never_exceeds_a_small_window(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    ws = make_workspace(tmp_path / "pal", secrets={"local": {"ctx": 4096, "parallel": 2}},
                        env={"PAL_DEFAULT_TIMEOUT": "600"})  # its own server: a smaller context than the shared one
    llm = ws.llm(session_id="real-synth-window")
    config = SynthConfig(lang="en", months=1, seed=3, description="a 45-year-old nurse in Leeds who cycles to work",
                         situations_min=3, situations_max=3, max_topics=2, min_logs=4, max_logs=6, retries=3,
                         tolerable_retries=0)
    started = time.perf_counter()
    pipe = Pipeline.create(config, str(tmp_path / "generated"), ws.synth, llm=llm)
    info = pipe.run()
    reruns = 0
    while info.status == "failed" and reruns < 2 and pipe.pending()[0] != "assemble":
        reruns += 1  # as a person would on the Generate page
        print(f"re-running {pipe.pending()[0]} after: {info.error}")
        info = pipe.rerun_from(pipe.pending()[0])
    seconds = time.perf_counter() - started
    budget = llm.budget("synthesizer")
    assert budget.window == 2048
    calls = llm.store.calls("real-synth-window", limit=5000)
    sent = [c for c in calls if not c["cache_hit"] and c["tokens_in"]]
    lowered = [c for c in sent if c["fit_note"]]
    print(f"generation: {info.status} in {seconds:.0f}s, {len(sent)} calls, largest request "
          f"{max(c['tokens_in'] + c['max_tokens'] for c in sent)} of {budget.window} tokens, {len(lowered)} fitted")
    for c in sent:
        assert c["tokens_in"] + c["max_tokens"] <= budget.window, c
    assert not [c for c in calls if c["error"] and "context" in c["error"].lower()]
    assert info.status == "finished", info.error
    situations = pipe.record("situations").output["situations"]
    assert len(situations) == 3
