"""A tour stop opened as the first view of a fresh app, on a home whose tour was warmed before, loads no embedding
model: every vector it needs (the indexed items, the stop's query) is in the home's embedding cache."""

from __future__ import annotations

import pytest

from backends import embeddings
from palset.loader import load_dataset
from testkit.workspace import make_workspace
from tests.conftest import DEMO
from tests.pages.apptest import open_page
from ui.warmup import topic_queries, warm_build


@pytest.mark.slow(seconds=15)
def test_gold_beside_rag_on_a_warmed_home_never_loads_the_model(tmp_path, monkeypatch):
    home = tmp_path / "pal"
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_HOME", str(home))
    loads: list[str] = []
    real = embeddings.EMBEDDERS["hash"]
    monkeypatch.setitem(embeddings.EMBEDDERS, "hash", embeddings.EmbedderSpec(
        lambda batch_size: loads.append("hash") or real.load(batch_size), real.packages, real.version))
    dataset = load_dataset(DEMO)
    warmer = make_workspace(home, env={"PAL_EMBEDDER": "hash"})  # the first start's warm-up (another process)
    for method in ("gold", "rag-turn"):
        assert "indexed" in warm_build(warmer, dataset, "1002", method)
    assert loads and warmer.embed_cache() is not None and warmer.embed_cache().size() > len(topic_queries(
        dataset.users["1002"]))
    loads.clear()

    at = open_page("memory", user="1002", method="gold", tab="Retrieval", compare="rag-turn",
                   topic="1002_sample7/topic-1", purpose="solution")
    traces = [d.value for d in at.dataframe if "score" in d.value.columns]
    assert len(traces) == 2 and all(len(t) for t in traces)  # both retrievals ran, on cached vectors only
    assert loads == []

    at.radio(key="mem_purpose").set_value("requirement").run()  # another query the tour warmed: still no model
    assert not at.exception and loads == []


@pytest.mark.slow(seconds=20)
def test_the_leaderboards_stop_reads_the_board_the_servers_start_computed(tmp_path, monkeypatch):
    """``serve.py``'s start (``make run``) imports the demo bundle into the home and computes the fidelity board the
    leaderboards stop shows: its first view draws no bootstrap; a report stored later is on the board at once."""
    from evaluation.fidelity import board
    from evaluation.takeaway_words import method_label
    from tests.ui.test_warmup import fidelity_report
    from ui import warmup

    bundle = str(DEMO / "workspace.palbundle")
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_DEMO_WORKSPACE", bundle)
    monkeypatch.setattr(warmup, "warm_tour", lambda ws, root: [])  # the embedders and indexes: tested on their own
    done = warmup.warm_demo_at_start({"PAL_DEMO_WORKSPACE": bundle})
    assert any("leaderboard" in d for d in done) and "warm-up started" in done

    computed: list[int] = []
    real = board.leaderboard
    monkeypatch.setattr(board, "leaderboard", lambda reports, **kw: computed.append(len(reports)) or real(reports, **kw))
    at = open_page("evaluate", section="leaderboards")
    methods = next(d.value for d in at.dataframe if "method" in d.value.columns)
    assert computed == [] and len(methods)  # the first view read the board computed before it

    from tests.pages.apptest import app_workspace

    ws = app_workspace()
    ws.fidelity.save(fidelity_report(str(DEMO.resolve()), "1000", "vanilla-log", 0.3))  # measured since
    at.run()
    assert computed and not at.exception
    rows = [d.value for d in at.dataframe if "method" in d.value.columns]
    assert any(m.startswith(method_label("vanilla-log")) and "hash" in m for m in rows[0]["method"])  # its own row
