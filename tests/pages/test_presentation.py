"""Presentation mode and the tour: a bundle presented read-only resolves every tour stop (AppTest per stop),
makes zero LLM calls through the whole tour (a fake endpoint counts requests), offers no control that writes
and changes no record even when every offered button is pressed."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from palset.loader import load_dataset
from testkit.fault_server import FaultServer
from testkit.worked import make_tour_bundle
from tests.conftest import DEMO
from tests.pages.apptest import all_markdown, app_workspace, open_page

WRITES = {"mem_build", "mem_fresh", "mem_save", "mem_forget", "mem_fid_judge", "eval_judge", "eval_bench_run",
          "eval_cal_send", "eval_fid_run", "sim_start", "sim_resume_replay", "sim_stop", "sim_resume", "sim_continue",
          "review_create", "review_undo", "review_start", "plum_probe", "gen_start", "gen_new"}
WRITE_PREFIXES = ("mem_build_", "review_requirement_", "review_preference_", "review_logs_", "review_dialogue_")
N_STOPS = 14


@pytest.fixture(scope="module")
def tour_bundle(tmp_path_factory):
    home = tmp_path_factory.mktemp("tour")
    out = home / "tour.palbundle"
    mp = pytest.MonkeyPatch()
    mp.setenv("PAL_EMBEDDER", "hash")
    make_tour_bundle(home / "src", load_dataset(DEMO), out)
    mp.undo()
    return out


@pytest.fixture
def endpoint(tmp_path, monkeypatch, tour_bundle):
    """Every role on a fake OpenAI-compatible endpoint that counts requests; the app presents the bundle."""
    server = FaultServer(default=("ok", "an LLM was called"))
    with server.running():
        monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
        monkeypatch.setenv("PAL_EMBEDDER", "hash")
        monkeypatch.setenv("PAL_PRESENT", str(tour_bundle))
        monkeypatch.setenv("PAL_DEFAULT_PROVIDER", "openai")
        monkeypatch.setenv("PAL_DEFAULT_BASE_URL", server.base_url)
        monkeypatch.setenv("PAL_DEFAULT_MODEL", "counting-model")
        monkeypatch.setenv("PAL_DEFAULT_API_KEY", "sk-counting")
        yield server


def tour_links() -> list[tuple[str, dict[str, str]]]:
    at = open_page("home")
    return [(p.proto.page, dict(parse_qsl(p.proto.query_string))) for p in at.get("page_link")
            if "tour=" in p.proto.query_string]


def open_stop(index: int):
    page, params = tour_links()[index]
    return open_page(page or "home", **params)


def records():
    """Every row of the presented workspace, per table."""
    ws = app_workspace()
    return {t: ws.tables.select(t, ws.tables.columns(t)) for t in ("memory_builds", "memory_items", "sim_runs",
                                                                     "sim_turns", "judgments", "memory_fidelity",
                                                                     "review_answers", "llm_calls", "bench_results",
                                                                     "jobs", "job_units")}


def offered_writes(at) -> list[str]:
    keys = [b.key or "" for b in at.button if not b.disabled]
    return [k for k in keys if k in WRITES or k.startswith(WRITE_PREFIXES)]


def test_the_tour_has_stops_on_every_page(endpoint):
    links = tour_links()
    assert len(links) == N_STOPS
    assert {page for page, _ in links} == {"users", "memory", "simulate", "evaluate", "review"}


@pytest.mark.parametrize("index", range(N_STOPS))
def test_every_stop_resolves_in_the_presented_bundle(endpoint, index):
    at = open_stop(index)
    text = all_markdown(at)
    assert f"Tour · stop {index + 1} of {N_STOPS}" in text
    assert not [w.value for w in at.warning if "yet: run" in w.value], "the bundle lacks this stop's records"
    assert "Presentation: read\\-only" in text or "Presentation: read-only" in text
    assert offered_writes(at) == []
    if index + 1 < N_STOPS:
        assert at.button(key="tour_next").label.startswith("Next stop: ")
    page, params = tour_links()[index]
    check = {"simulate": _shows_a_run, "evaluate": _shows_judgment_or_board, "review": _shows_annotator_view,
             "memory": _shows_memory}.get(page)
    if check:
        check(at, params)


def _shows_a_run(at, params):
    assert "run" in at.query_params
    badges = [m.value for m in at.markdown if "-badge[" in m.value]
    assert len(badges) >= 4  # act badges on the utterances
    assert any(e.label == "Memory and prompt" for e in at.expander)
    assert "Retrieval query" in all_markdown(at) or "No retrieval query" in all_markdown(at)
    assert "Made with" in all_markdown(at)


def _shows_judgment_or_board(at, params):
    if params.get("section") == "leaderboards":
        headers = [h.value for h in at.header]
        assert "Memory fidelity against the gold memory" in headers  # the link opens on the leaderboards
        assert "Multi-turn: FairEval pairwise judging" not in headers  # the rest is drawn when asked
        boards = [d.value[c] for d in at.dataframe for c in ("method", "row") if c in d.value.columns]
        assert any(column.astype(str).str.contains("Turn-level RAG").any() for column in boards)  # its label
        at.toggle(key="eval_rest_of_page").set_value(True).run()
        headers = [h.value for h in at.header]
        assert headers.index("Memory fidelity against the gold memory") < headers.index(
            "Multi-turn: FairEval pairwise judging")  # below the boards, once asked for
        return
    assert {m.label for m in at.metric} >= {"requirement: win", "requirement: tie", "requirement: lose"}
    text = all_markdown(at)
    assert "order 1" in text.lower() and "order 2" in text.lower()  # both orders of the judgment
    assert at.selectbox(key="eval_judge_model").value == "scripted-judge"


def _shows_annotator_view(at, params):
    text = all_markdown(at)
    assert "What an annotator sees" in "\n".join(i.value for i in at.info)
    assert "Response A" in text and "Response B" in text
    banner = {m.value for e in at.expander if e.label == "Where these records came from" for m in e.markdown}
    shown = [m.value for m in at.main.markdown if m.value not in banner and not m.value.startswith(":material/")]
    assert not [t for t in shown if any(name in t for name in ("gold", "rag\\-turn", "vanilla"))]  # blinded


def _shows_memory(at, params):
    if params.get("tab") == "Retrieval":
        assert len([d for d in at.dataframe if "score" in d.value.columns]) == 2
    elif params.get("tab") == "Fidelity":
        assert any(m.label == "Text precision" for m in at.metric)
    elif params.get("item"):
        assert at.selectbox(key="mem_item").value == params["item"]
        assert any("source" in d.value.columns and len(d.value) for d in at.dataframe)
    assert "Made by: no LLM" in all_markdown(at)


@pytest.mark.slow(seconds=26)
def test_a_whole_tour_with_every_button_pressed_makes_no_llm_call_and_changes_nothing(endpoint):
    """Each stop, then every enabled button of it pressed in turn (each on a fresh open of the stop)."""
    open_page("home")
    before = records()
    pressed = 0
    for index in range(N_STOPS):
        at = open_stop(index)
        for n in [n for n, b in enumerate(at.button) if not b.disabled]:
            at = open_stop(index)
            label = at.button[n].label
            at.button[n].click().run()
            assert not at.exception, (index, label, [e.value for e in at.exception])
            pressed += 1
    assert pressed >= 2 * N_STOPS
    assert endpoint.requests == []
    assert records() == before


def test_presenting_offers_no_generate_or_settings_and_says_where_records_came_from(endpoint):
    at = open_page("home")
    banner = all_markdown(at)
    assert "Presentation: read" in banner and "demo" in banner
    lines = [e for e in at.expander if e.label == "Where these records came from"]
    made = "\n".join(m.value for m in lines[0].markdown)
    assert "scripted\\-judge" in made and "judgments" in made and "simulation runs" in made
    for page in ("generate", "settings"):
        at = open_page(page)
        assert any("not offered while presenting" in i.value for i in at.info)


def test_records_made_elsewhere_are_shown_by_their_judge_configured_first(endpoint, monkeypatch):
    """The configured judge (counting-model) has no judgment here: the bundle's judge is offered instead."""
    page, params = tour_links()[next(i for i, (p, q) in enumerate(tour_links()) if p == "evaluate" and "pair" in q)]
    at = open_page(page, **params)
    assert at.selectbox(key="eval_judge_model").options == ["scripted-judge"]


def test_imported_judgments_and_builds_show_outside_presentation_too(tmp_path, monkeypatch, tour_bundle):
    """Not presenting: the bundle imported into the home; Evaluate offers the bundle's judge although another is
    configured, and the Judge button stays (writes are allowed); the Memory page labels who made each build."""
    from studio.bundle.importer import import_bundle

    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    open_page("home")
    import_bundle(app_workspace(), tour_bundle, known={"demo": DEMO})
    at = open_page("evaluate", pair="rag-turn__vanilla-log", aspect="requirement", topic="1002_sample7_topic-1")
    assert at.selectbox(key="eval_judge_model").value == "scripted-judge"
    assert at.button(key="eval_judge") is not None
    assert "by Qwen2\\.5\\-Coder\\-0\\.5B\\-Instruct\\-Q4\\_K\\_M" in all_markdown(at)  # what the configured judge has left to judge
    assert {m.label for m in at.metric} >= {"requirement: win"}
    ws = app_workspace()
    from palset.loader import load_dataset as load

    ws.open_builder(load(DEMO), "1002", "rag-turn", method_config={"k": 4}).run(until_session=0)  # a second build
    at = open_page("memory", user="1002", method="rag-turn")
    builds = at.selectbox(key="mem_build_id")
    assert len(builds.options) == 2
    assert "Made by" in all_markdown(at)


def test_the_presented_experiment_shows_the_tables_of_the_source(endpoint, tour_bundle):
    """Evaluate → Experiments while presenting: the bundle's experiment, with the report tables its source home
    gives (rebuilt from the imported units and records), and no unit offered to run."""
    import pandas as pd

    from protocol.config import ExperimentConfig
    from protocol.report import build_report, fair_rows, single_rows
    from testkit.workspace import make_workspace

    source = make_workspace(tour_bundle.parent / "src", env={"PAL_EMBEDDER": "hash"})
    (job,) = source.jobs.store.jobs(kind="experiment")
    exp = ExperimentConfig.model_validate(source.jobs.store.config(job.job_id)["experiment"])
    report = build_report(exp, source.jobs.store.units(job.job_id), source.evals)
    at = open_page("evaluate")
    assert at.selectbox(key="eval_experiment").value == job.job_id
    shown = [d.value for d in at.dataframe]
    for head, rows in (single_rows(report), fair_rows(report)):
        want = pd.DataFrame(rows, columns=head)
        assert any(list(f.columns) == head and f.equals(want) for f in shown), head
    assert app_workspace().jobs.store.summary(job.job_id).counts["done"] == job.total
