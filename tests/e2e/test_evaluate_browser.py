"""End to end: the Evaluate page's drill-down deep link in headless Chromium, on runs and judgments stored beforehand."""

from __future__ import annotations

import pytest

from backends.config import ROLES, load_config
from backends.llm.fake import ScriptedLLM
from evaluation.service import judge_runs, pair_runs
from palset.dataset import dataset_key
from palset.loader import load_dataset
from testkit.browser import browser_page, chromium_available, running_app
from tests.conftest import DEMO
from tests.pages.apptest import app_workspace
from tests.pages.test_evaluate_page import PAIR, SAMPLE, A, B, judge, store_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="Debian chromium not installed (make browser)"),
]

CHAT = "[data-testid='stChatMessage']"


@pytest.fixture
def pal_env(tmp_path, monkeypatch) -> dict[str, str]:
    """PAL_HOME and the hash embedder, for this process (runs and judgments) and the app alike."""
    env = {"PAL_HOME": str(tmp_path / "pal"), "PAL_EMBEDDER": "hash"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def prepare() -> None:
    """Two finished runs on one topic (A's carries the judge's marker), judged with k=2 on both aspects."""
    from tests.evaluation.conftest import MARKER

    store_run(A, "topic-1", MARKER)
    store_run(B, "topic-1", "plain")
    ws = app_workspace()
    client = ws.with_config(load_config(secrets={}, env={})).llm(providers=dict.fromkeys(ROLES, ScriptedLLM(judge)))
    pairs = pair_runs(ws.sims, dataset_key(DEMO), A, B)
    judged = judge_runs(client, load_dataset(DEMO), ws.sims, ws.evals, pairs, ["requirement", "preference"], k=2)
    assert [j.decision for j in judged] == ["win", "win"]


def test_drilldown_deep_link_shows_both_dialogues_and_every_sample(pal_env):
    prepare()
    with running_app(env=pal_env) as url, browser_page(height=4000) as page:
        page.goto(f"{url}/evaluate?pair={PAIR}&topic={SAMPLE}_topic-1")
        page.wait_for_selector("text=Order 2 (swapped)", timeout=60_000)
        assert page.locator(CHAT).count() == 8  # both runs, four utterances each
        body = page.locator("[data-testid='stMain']").inner_text()
        assert f"[{A}]" in body and f"[{B}]" in body  # each run's own text
        assert "I need help with my *rota*." in body  # markdown in data shows literally
        assert page.get_by_text("Order 1 (as is)").count() == 2 and page.get_by_text("Order 2 (swapped)").count() == 2
        assert body.count("overall 9-4") == 4 and body.count("overall 4-9") == 4  # k=2 × 2 orders × 2 aspects
        assert "first is **bold** [x](y)" in body
        assert "User query:" in body
        page.wait_for_selector(".js-plotly-plot", timeout=30_000)  # the outcome bars render
        assert f"pair={PAIR}" in page.evaluate("location.href")
