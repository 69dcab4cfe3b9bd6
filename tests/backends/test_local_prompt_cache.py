"""The real bundled server keeps prompts (``cache_prompt``) and says what its cache served; every call record keeps
it, and the server's own counters (``/metrics``) are on. About 20 s on one busy core."""

import urllib.request

import pytest

from testkit.workspace import make_workspace

pytestmark = [pytest.mark.slow(seconds=33), pytest.mark.local_model]

CONTEXT = ("A nurse works night shifts on a hospital ward, sleeps badly in the mornings, and looks after her mother "
           "at weekends. ") * 6


def test_a_prompt_sharing_a_prefix_is_served_from_the_servers_cache(local_servers, tmp_path):
    ws = make_workspace(tmp_path / "pal", servers=local_servers)
    llm = ws.llm(session_id="s")
    assert llm.width("assistant") == ws.config.local.parallel  # the bundled server's slots
    for question in ("What should she eat?", "When should she sleep?"):
        llm.chat("assistant", [{"role": "user", "content": f"{CONTEXT}\n{question}"}], max_tokens=4, use_cache=False)
    first, second = reversed(ws.runs.calls("s"))
    assert first["tokens_cached"] is not None and second["tokens_cached"] > 0.8 * second["tokens_in"]
    assert second["tokens_processed"] == second["tokens_in"] - second["tokens_cached"] > 0
    root = llm.provider("assistant").tokenizer_root()
    with urllib.request.urlopen(f"{root}/metrics", timeout=10) as r:
        assert "prompt_tokens_total" in r.read().decode()
