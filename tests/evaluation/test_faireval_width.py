"""A FairEval judgment against an OpenAI-compatible endpoint nobody configured (no ``[limits]``, no slot count, a
latency like a remote API's): its 2 × k samples go out together, not one after another."""

from __future__ import annotations

import threading
import time

import pytest

from backends.config import EndpointLimits
from backends.llm.limits import DEFAULT_CONCURRENCY
from evaluation.faireval import judge_pair
from evaluation.service import topic_context
from testkit.fake_endpoints import FakeEndpoint
from testkit.workspace import make_workspace
from tests.evaluation.conftest import SAMPLE, TOPIC, USER


class CountingEndpoint(FakeEndpoint):
    """A fake endpoint that holds each answer ``hold`` seconds and counts the requests it serves at once."""

    def __init__(self, hold: float):
        super().__init__()
        self.hold, self.now, self.most = hold, 0, 0
        self._count = threading.Lock()

    def answer(self, body):
        with self._count:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.hold)
        with self._count:
            self.now -= 1
        return super().answer(body)


def judge_on(tmp_path, server: CountingEndpoint, demo, runs, limits: dict | None = None):
    env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "m"}
    ws = make_workspace(tmp_path / "pal", env=env, secrets={"cache": False, **({"limits": limits} if limits else {})})
    llm = ws.llm(session_id="width")
    j = judge_pair(llm, topic_context(demo, USER, SAMPLE, TOPIC), runs[0], runs[1], "requirement", k=3,
                   temperature=1.0)
    return ws, j


@pytest.fixture
def runs(env):
    from tests.evaluation.conftest import MARKER, store_run

    _, sims, _ = env
    return store_run(sims, "h2memory", MARKER), store_run(sims, "vanilla", "plain")


@pytest.mark.slow(seconds=6)
def test_an_unconfigured_endpoint_gets_a_k3_judgments_samples_in_flight_together(tmp_path, demo, runs):
    with CountingEndpoint(hold=0.4).running() as server:
        ws, j = judge_on(tmp_path, server, demo, runs)
        width = ws.limiters.describe(server.base_url)
    assert len(j.samples) == 6 and all(s.ok for s in j.samples)
    assert server.most >= 4  # the acceptance line: at least four of the six samples at once
    assert width.source == "default" and width.ceiling == DEFAULT_CONCURRENCY


@pytest.mark.slow(seconds=8)
def test_configured_width_one_still_sends_one_at_a_time(tmp_path, demo, runs):
    with CountingEndpoint(hold=0.1).running() as server:
        ws, j = judge_on(tmp_path, server, demo, runs, limits={server.base_url: {"concurrency": 1}})
        width = ws.limiters.describe(server.base_url)
    assert server.most == 1 and len(j.samples) == 6
    assert width.source == "configured" and width.width == 1


def test_the_default_width_halves_on_a_429_and_grows_back(tmp_path):
    from backends.llm.limits import Limiters

    limiters = Limiters({"http://conf/v1": EndpointLimits(concurrency=2)})
    assert limiters.width("http://nobody/v1") == DEFAULT_CONCURRENCY
    lim = limiters.limiter("http://nobody/v1")
    assert lim is not None
    lim.release(lim.acquire(10), 10, rate_limited=True, retry_after=0.0)
    assert limiters.width("http://nobody/v1") == DEFAULT_CONCURRENCY // 2
    for _ in range(DEFAULT_CONCURRENCY):
        lim.release(lim.acquire(10), 10, rate_limited=False, retry_after=None)
    assert limiters.width("http://nobody/v1") == DEFAULT_CONCURRENCY  # back to the default, never beyond
    assert limiters.describe("http://nobody/v1").rate_limited == 1
    assert limiters.describe("local:m", slots=3).source == "server slots"
    assert limiters.describe("fake://scripted").source == "none"
    assert limiters.describe("http://conf/v1", slots=5).source == "configured"
