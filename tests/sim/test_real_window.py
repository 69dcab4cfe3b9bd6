"""A full-history simulation on a demo user against the real bundled llama.cpp server, whose slots give each
request 4,096 tokens (ctx 8192 / parallel 2): every prompt fits the slot's window − max_tokens (by the server's
own count of prompt tokens) and each assistant turn's trace shows what was cut.

Free mode with one turn and short answers keeps it short on a shared CPU (a 3,000-token prompt takes a while)."""

import time

import pytest

from backends.embeddings import HashEmbedder
from backends.llm.context import describe_cuts
from backends.vectorstore import BruteForceStore
from memory.build import MemoryBuilder
from palset.loader import load_dataset
from sim.service import make_spec
from testkit.workspace import make_workspace
from tests.conftest import DEMO, local_model_env

pytestmark = [pytest.mark.slow(seconds=75), pytest.mark.local_model]


def test_full_history_simulation_fits_the_bundled_servers_slot(local_servers, tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path))
    env = {"PAL_DEFAULT_MAX_TOKENS": "48", "PAL_DEFAULT_TIMEOUT": "600", **local_model_env()}
    ws = make_workspace(tmp_path, env=env, servers=local_servers)
    llm = ws.llm(session_id="real-window")
    ds = load_dataset(DEMO)
    user = ds.users["1000"]
    embedder = HashEmbedder()  # full history retrieves nothing by similarity
    builder = MemoryBuilder("demo", user, "full-history", ws.memory, BruteForceStore(embedder), embedder)
    builder.run()
    spec = make_spec(ds, "1000", "1000_sample7", "topic-1", "full-history", mode="free", max_turns=1)
    started = time.perf_counter()
    record = ws.open_simulation(ds, spec, llm, builder=builder).run()
    seconds = time.perf_counter() - started
    assert record.status == "finished", record.error
    budget = llm.budget("assistant")
    assert budget.window == 4096 and budget.window_source == "endpoint /v1/models"
    assert budget.counter_name.endswith("/tokenize")  # the bundled model's own tokenizer
    calls = [c for c in llm.store.calls("real-window") if not c["cache_hit"]]
    assert calls and all(c["error"] is None for c in calls)
    for c in calls:  # the server's own prompt count
        assert 0 < c["tokens_in"] <= c["context_window"] - c["max_tokens"], c
    answers = [u for u in record.utterances if u.side == "assistant"]
    assert answers
    for u in answers:
        assert u.trace["full_history_tokens"] > 4096
        shown = describe_cuts(u.trace["cuts"])
        assert shown.startswith("trimmed ") and "sessions 1000_sample0" in shown
    worst = max(c["tokens_in"] for c in calls)
    print(f"full-history simulation ({env['PAL_DEFAULT_MODEL']}): {seconds:.0f}s, {len(calls)} calls, largest prompt {worst} tokens "
          f"of {budget.window} − {budget.max_tokens}; {describe_cuts(answers[-1].trace['cuts'])}")
