"""The demo tour's memories are warmed in the background of the first start: each build a memory stop shows is
indexed (made first when it needs no LLM), an LLM build nobody made is left to the page, a failure is logged."""

from __future__ import annotations

import json
import shutil

import pytest

from memory.methods import get_method_class
from palset.loader import load_dataset
from testkit.workspace import make_workspace
from tests.conftest import DEMO
from ui.fidelity import FIDELITY_BASELINE
from ui.warmup import fidelity_method, tour_builds, tour_fidelity, warm_build, warm_fidelity, warm_tour


def test_the_tours_memory_stops_name_their_builds_once_each():
    wanted = tour_builds(load_dataset(DEMO))
    stops = [s for s in json.loads((DEMO / "tour.json").read_text(encoding="utf-8")) if s.get("page") == "memory"]
    assert wanted and len(wanted) == len(set(wanted))
    for s in stops:
        assert (s["user"], s["method"]) in wanted
        if s.get("tab") == "Retrieval" and s.get("compare"):
            assert (s["user"], s["compare"]) in wanted


def test_the_tours_fidelity_stops_name_the_method_their_tab_measures():
    stops = [s for s in json.loads((DEMO / "tour.json").read_text(encoding="utf-8"))
             if s.get("page") == "memory" and s.get("tab") == "Fidelity"]
    wanted = tour_fidelity(load_dataset(DEMO))
    assert stops and len(wanted) == len({(s["user"], s.get("compare") or s["method"]) for s in stops})
    from ui.tour import TourStop

    assert fidelity_method(TourStop(title="t", text="t", page="memory", user="1", method="gold")) == FIDELITY_BASELINE
    assert fidelity_method(TourStop(title="t", text="t", page="memory", user="1", method="gold",
                                    compare="vanilla-log")) == "vanilla-log"
    assert fidelity_method(TourStop(title="t", text="t", page="memory", user="1", method="rag-session")) == "rag-session"


@pytest.mark.slow(seconds=20)
def test_a_fidelity_stop_is_measured_and_stored_with_its_references_once(tmp_path):
    ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    dataset = load_dataset(DEMO)
    assert warm_fidelity(ws, dataset, "1001", "vanilla-log").endswith("measured")
    dkey = str(DEMO.resolve())
    stored = ws.fidelity.latest(dkey)
    methods = {r.method for r in stored}
    assert "vanilla-log" in methods and "ref:empty" in methods and not any(r.stale for r in stored)
    assert warm_fidelity(ws, dataset, "1001", "vanilla-log").endswith("measured")  # reused: nothing new stored
    assert len(ws.fidelity.latest(dkey)) == len(stored)
    assert "not built" in warm_fidelity(ws, dataset, "1001", "h2memory")


def test_a_build_without_llm_is_made_and_indexed_and_an_llm_build_is_left_alone(tmp_path):
    ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    dataset = load_dataset(DEMO)
    assert warm_build(ws, dataset, "1001", "rag-turn").startswith("rag-turn of 1001: indexed")
    builder = ws.open_user_builder(str(DEMO.resolve()), dataset.users["1001"], "rag-turn")
    layers = {v[0].layer for v in builder.store.versions(builder.build_id)}
    assert sum(builder.index.count(layer) for layer in layers) == len(builder.store.versions(builder.build_id)) > 0
    assert get_method_class("h2memory").uses_llm
    assert "not built" in warm_build(ws, dataset, "1001", "h2memory")


def test_a_stop_the_tour_cannot_show_is_skipped_and_the_rest_warm(tmp_path):
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("*.palbundle"))
    (root / "tour.json").write_text(json.dumps([
        {"title": "a", "text": "t", "page": "memory", "user": "1001", "method": "no-such-method"},
        {"title": "b", "text": "t", "page": "memory", "user": "1001", "method": "vanilla-log"}]), encoding="utf-8")
    ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    done = warm_tour(ws, root)
    assert done[0].startswith("embedders loaded: hash") and done[1] == "modules imported: none"  # no Evaluate stop
    assert [d.split(",")[0] for d in done[2:]] == ["vanilla-log of 1001: indexed"]


def test_a_tour_with_an_evaluate_stop_imports_its_statistics_libraries():
    from ui.warmup import EVALUATE_MODULES, warm_modules

    assert warm_modules(load_dataset(DEMO)) == list(EVALUATE_MODULES)  # the demo tour has Evaluate stops


def test_the_demo_warm_up_starts_once_per_home_and_only_for_a_bundle_beside_a_tour(tmp_path):
    from ui.warmup import start_demo_warmup

    ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    assert start_demo_warmup(ws, {}) is None
    assert start_demo_warmup(ws, {"PAL_DEMO_WORKSPACE": str(tmp_path / "elsewhere.palbundle")}) is None  # no tour
    root = tmp_path / "demo"
    root.mkdir()
    (root / "tour.json").write_text("[]", encoding="utf-8")
    env = {"PAL_DEMO_WORKSPACE": str(root / "workspace.palbundle")}
    first = start_demo_warmup(ws, env)
    assert first is not None and start_demo_warmup(ws, env) is None  # once per process and home
    first.join(timeout=30)
    assert not first.is_alive()


def test_the_tours_pages_are_preloaded_with_the_libraries_their_first_view_imports(caplog):
    import logging
    import sys

    from ui.warmup import demo_root, preload_demo_pages, tour_page_modules

    modules = tour_page_modules(DEMO)
    assert modules[0] == "ui.home.view" and {"ui.memory.view", "ui.evaluate.view", "chromadb", "streamlit.emojis"} <= set(
        modules)
    assert len(modules) == len(set(modules))
    assert demo_root({"PAL_DEMO_WORKSPACE": str(DEMO / "workspace.palbundle")}) == DEMO
    assert demo_root({}) is None and preload_demo_pages({}) == []
    with caplog.at_level(logging.INFO, logger="ui.warmup"):
        done = preload_demo_pages({"PAL_DEMO_WORKSPACE": str(DEMO / "workspace.palbundle")})
    assert done == modules and all(m in sys.modules for m in modules) and "tour pages preloaded" in caplog.text


def fidelity_report(dkey: str, user: str, method: str, recall: float):
    """A stored-looking fidelity report of one user (one history session), as a bundle carries them."""
    from evaluation.fidelity.types import FidelityConfig, FidelityReport, SessionFidelity

    return FidelityReport(dataset=dkey, user_id=user, method=method, layered=True, build_id=f"b-{method}-{user}",
                          stages_done=2, embedder="hash", threshold=0.8, config=FidelityConfig(),
                          fidelity_key=f"fidelity-{method}-{user}", history_sessions=1,
                          sessions=[SessionFidelity(sample_id=f"{user}_sample0", position=0, split="history",
                                                    requirement_recall=recall, text_recall=recall)])


def test_the_tours_fidelity_board_is_computed_before_its_first_view_and_a_new_report_invalidates_it(tmp_path):
    from evaluation.takeaway_words import dataset_argument, language_of
    from evaluation.takeaways import fidelity_board_known
    from ui.warmup import precompute_tour

    ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    dataset, dkey = load_dataset(DEMO), str(DEMO.resolve())
    for user, method, recall in (("1000", "ref:empty", 0.0), ("1001", "ref:empty", 0.1), ("1000", "rag-turn", 0.5),
                                 ("1001", "rag-turn", 0.6)):
        ws.fidelity.save(fidelity_report(dkey, user, method, recall))
    done = precompute_tour(ws, dataset)
    assert len(done) == 1 and "4 fidelity report(s) parsed" in done[0] and "1 headline" in done[0]
    shown = (language_of(dataset.language), dataset_argument(DEMO))
    _, revision = ws.fidelity.latest_with_revision(dkey)
    assert fidelity_board_known(revision, *shown)  # the page's first view reads it

    ws.fidelity.save(fidelity_report(dkey, "1000", "vanilla-log", 0.3))  # measured after the server started
    _, newer = ws.fidelity.latest_with_revision(dkey)
    assert newer != revision and not fidelity_board_known(newer, *shown)  # the page computes the new board


def test_a_tour_without_fidelity_stops_precomputes_nothing(tmp_path):
    from ui.warmup import precompute_tour, warm_demo_at_start

    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("*.palbundle"))
    (root / "tour.json").write_text(json.dumps([{"title": "a", "text": "t", "user": "1001"}]), encoding="utf-8")
    assert precompute_tour(make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"}), load_dataset(root)) == []
    assert warm_demo_at_start({}) == []  # no demo workspace: the server starts as it always did


@pytest.mark.slow(seconds=15)
def test_the_warm_up_ends_with_the_board_over_the_reports_it_measured(tmp_path):
    from evaluation.takeaway_words import dataset_argument, language_of
    from evaluation.takeaways import fidelity_board_known

    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("*.palbundle"))
    (root / "tour.json").write_text(json.dumps([
        {"title": "a", "text": "t", "page": "memory", "user": "1001", "method": "vanilla-log", "tab": "Fidelity"},
        {"title": "b", "text": "t", "page": "evaluate", "section": "leaderboards"}]), encoding="utf-8")
    ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    done = warm_tour(ws, root)
    assert "fidelity of vanilla-log for 1001: measured" in done and "leaderboard" in done[-1]
    dataset = load_dataset(root)
    reports, revision = ws.fidelity.latest_with_revision(str(root.resolve()))
    assert {r.method for r in reports} >= {"vanilla-log", "ref:empty"}  # measured by the warm-up, then ranked
    assert fidelity_board_known(revision, language_of(dataset.language), dataset_argument(root))
