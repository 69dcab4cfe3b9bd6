"""Per-endpoint limits against a local fake OpenAI-compatible endpoint: concurrent requests, requests and
tokens per window, and adaptive backoff on 429 — shared by every client of one workspace."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from backends.config import EndpointLimits
from backends.llm.errors import Cancelled
from backends.llm.limits import DEFAULT_CONCURRENCY, Limiters
from testkit.fault_server import FaultServer, completion
from testkit.workspace import make_workspace


class Recorder:
    """A fake endpoint's behaviour that records when each request arrived and how many were in flight."""

    def __init__(self, latency: float = 0.0, tokens: int = 10):
        self.latency, self.tokens = latency, tokens
        self.arrivals: list[float] = []
        self.in_flight = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, body):
        import json

        with self._lock:
            self.arrivals.append(time.monotonic())
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(self.latency)
        with self._lock:
            self.in_flight -= 1
        data = completion("fine")
        data["usage"] = {"prompt_tokens": self.tokens - 2, "completion_tokens": 2, "total_tokens": self.tokens}
        return 200, {"content-type": "application/json"}, json.dumps(data).encode()


def workspace(tmp_path, server: FaultServer, limits: EndpointLimits, window: float = 60.0):
    env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "m",
           "PAL_DEFAULT_MAX_RETRIES": "6"}
    ws = make_workspace(tmp_path / "pal", env=env, secrets={"limits": {server.base_url: limits.model_dump()},
                                                            "cache": False})
    ws.limiters = Limiters(ws.config.limits, window=window)
    return ws


def call_many(ws, n: int, threads: int, clients: int = 2, before=None) -> None:
    """``n`` calls from ``threads`` threads over ``clients`` separate clients (as separate jobs would). Each
    client makes one call first (SDK import, connection), then the limiter's windows and the server's record
    start afresh and ``before`` runs, so what the server sees is what the limiter admitted."""
    llms = [ws.llm(session_id=f"job-{i}") for i in range(clients)]
    for llm in llms:
        llm.chat("assistant", [{"role": "user", "content": "warm up"}])
    ws.limiters = Limiters(ws.limiters._limits, window=ws.limiters.window)
    for llm in llms:
        llm.limiters = ws.limiters
    if before is not None:
        before()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: llms[i % clients].chat("assistant", [{"role": "user", "content": f"q{i}"}]), range(n)))


def test_concurrent_requests_stay_within_the_limit_across_clients(tmp_path):
    rec = Recorder(latency=0.1)
    with FaultServer(default=rec).running() as server:
        ws = workspace(tmp_path, server, EndpointLimits(concurrency=3))
        call_many(ws, n=12, threads=8, before=rec.arrivals.clear)
    assert rec.most == 3 and len(rec.arrivals) == 12
    assert ws.limiters.limiter(server.base_url).max_in_flight == 3


@pytest.mark.parametrize("limits", [EndpointLimits(requests_per_minute=4), EndpointLimits(tokens_per_minute=40)])
@pytest.mark.slow(seconds=10)
def test_requests_and_tokens_per_window_are_kept(tmp_path, limits):
    rec = Recorder(tokens=10)  # 40 tokens per window = 4 requests per window either way
    window = 1.0
    with FaultServer(default=rec).running() as server:
        ws = workspace(tmp_path, server, limits, window=window)
        started = []
        call_many(ws, n=10, threads=5, before=lambda: (rec.arrivals.clear(), started.append(time.monotonic())))
        elapsed = time.monotonic() - started[0]
    assert len(rec.arrivals) == 10 and elapsed >= 2 * window * 0.95  # 10 requests need three windows
    admitted = list(ws.limiters.limiter(server.base_url).admitted)
    for t in admitted:  # no window ever admitted more than 4 requests
        assert sum(t <= a < t + window for a in admitted) <= 4
    # and nothing reached the endpoint before the limiter let it go: the i-th arrival comes after the i-th admission
    # (a check on arrivals per half window failed on a loaded machine, where admitted requests bunch up in transit)
    arrivals, let_go = sorted(rec.arrivals), sorted(admitted)[-len(rec.arrivals):]
    assert all(a >= t for a, t in zip(arrivals, let_go))


def test_429_halves_the_concurrency_and_waits_out_retry_after(tmp_path):
    rec = Recorder(latency=0.02)
    with FaultServer(default=rec).running() as server:
        ws = workspace(tmp_path, server, EndpointLimits(concurrency=8))
        started = []

        def then_429():
            rec.arrivals.clear()
            server.script.extend([("429", 1.0), ("429", 1.0)])
            started.append(time.monotonic())

        call_many(ws, n=8, threads=8, before=then_429)
        elapsed = time.monotonic() - started[0]
    limiter = ws.limiters.limiter(server.base_url)
    assert limiter.rate_limited == 2 and len(rec.arrivals) == 8  # every call succeeded after the 429s
    assert elapsed >= 1.0  # the whole endpoint paused for Retry-After, not only the failed requests
    offsets = sorted(a - started[0] for a in rec.arrivals)
    # nothing new was sent during the pause (a call let go before the 429 came back may still arrive late on a busy
    # machine: hence the window starts well after the burst)
    assert not [o for o in offsets if 0.4 < o < 0.98]
    assert offsets[-2] >= 0.98  # the two rate-limited calls went again after Retry-After
    assert 1 <= limiter.allowed <= 8
    failed = [c for c in ws.runs.calls() if c["error"]]
    assert failed == []  # 429s were retried inside the calls, which all succeeded


def test_configuring_the_same_limits_again_keeps_the_adaptive_state():
    limiters = Limiters({"http://e/v1": EndpointLimits(concurrency=8)})
    lim = limiters.limiter("http://e/v1")
    entry = lim.acquire(10)
    lim.release(entry, 10, rate_limited=True, retry_after=0.0)
    assert lim.allowed == 4
    limiters.configure({"http://e/v1/": EndpointLimits(concurrency=8)})  # a page rerun: same limits
    assert lim.allowed == 4
    limiters.configure({"http://e/v1": EndpointLimits(concurrency=2)})  # changed: adopted
    assert lim.allowed == 2 and lim.limits.concurrency == 2


def test_width_follows_the_limits_the_slots_or_the_default():
    limiters = Limiters({"http://conf/v1": EndpointLimits(concurrency=8), "http://rpm/v1": EndpointLimits(
        requests_per_minute=60)})
    assert limiters.width("http://nobody/v1") == DEFAULT_CONCURRENCY  # a network endpoint nobody configured
    assert limiters.width("fake://scripted") == 1 and limiters.limiter("fake://scripted") is None  # in-process
    assert limiters.width("local:model", slots=2) == 2  # the bundled server's parallel
    assert limiters.limiter("local:model").limits.concurrency == 2  # requests beyond its slots wait here
    assert limiters.width("http://conf/v1", slots=2) == 8  # configured limits win over what the server says
    assert limiters.width("http://rpm/v1") == 8 and limiters.width("http://rpm/v1", slots=3) == 3
    lim = limiters.limiter("http://conf/v1")
    lim.release(lim.acquire(10), 10, rate_limited=True, retry_after=0.0)
    assert limiters.width("http://conf/v1") == 4  # a 429 halves what goes out together


def test_slots_a_server_reports_cap_its_requests_in_flight(tmp_path):
    rec = Recorder(latency=0.1)

    def respond(body):
        return rec(body)

    with FaultServer(default=respond).running() as server:
        ws = make_workspace(tmp_path / "pal", env={"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_MODEL": "m",
                                                   "PAL_DEFAULT_BASE_URL": server.base_url}, secrets={"cache": False})
        llm = ws.llm()
        provider = llm.provider("assistant")
        provider.slots = lambda: 2  # as a llama.cpp server's /props says
        assert llm.width("assistant") == 2
        llm.fan_out("assistant", lambda i: llm.chat("assistant", [{"role": "user", "content": f"q{i}"}]), range(6))
    assert rec.most == 2 and len(rec.arrivals) == 6


def _queue_up(lim, priorities: list[int], admitted: list[int]) -> list[threading.Thread]:
    """One thread per priority, started one after another once the one before waits in ``lim``'s queue; each
    records its index when admitted and gives its slot back at once."""
    threads, before = [], lim.waiting
    for i, p in enumerate(priorities):
        def ask(i=i, p=p):
            entry = lim.acquire(10, priority=p)
            admitted.append(i)
            lim.release(entry, None, rate_limited=False, retry_after=None)

        t = threading.Thread(target=ask, daemon=True)
        t.start()
        threads.append(t)
        deadline = time.monotonic() + 5
        while lim.waiting < before + i + 1 and time.monotonic() < deadline:
            time.sleep(0.002)
        assert lim.waiting == before + i + 1
    return threads


def test_a_higher_priority_call_is_admitted_before_lower_ones_that_queued_earlier():
    lim = Limiters({"http://e/v1": EndpointLimits(concurrency=1)}).limiter("http://e/v1")
    held = lim.acquire(10)  # the one slot is busy: every request below waits in the queue
    admitted: list[int] = []
    threads = _queue_up(lim, [0, 0, 3, 0, 1], admitted)
    lim.release(held, None, rate_limited=False, retry_after=None)
    for t in threads:
        t.join(5)
    assert admitted == [2, 4, 0, 1, 3]  # by priority, then first come, first served
    assert lim.max_in_flight == 1 and lim.in_flight == 0 and lim.waiting == 0


def test_a_freed_slot_is_handed_to_the_head_of_the_queue_not_to_a_newcomer():
    lim = Limiters({"http://e/v1": EndpointLimits(concurrency=1)}).limiter("http://e/v1")
    held = lim.acquire(10)
    admitted: list[int] = []
    threads = _queue_up(lim, [0], admitted)
    lim.release(held, None, rate_limited=False, retry_after=None)
    assert lim.in_flight == 1 and lim.waiting == 0  # admitted on the waiter's behalf by the release itself
    late = threading.Thread(target=lambda: admitted.append(lim.release(lim.acquire(10), None, False, None) or 9))
    late.start()
    for t in [*threads, late]:
        t.join(5)
    assert admitted == [0, 9]


def test_a_cancelled_waiter_leaves_the_queue_and_the_next_one_gets_the_slot():
    lim = Limiters({"http://e/v1": EndpointLimits(concurrency=1)}).limiter("http://e/v1")
    held = lim.acquire(10)
    cancel = threading.Event()
    failed: list[BaseException] = []

    def doomed():
        try:
            lim.acquire(10, cancel, priority=5)
        except Cancelled as e:
            failed.append(e)

    first = threading.Thread(target=doomed, daemon=True)
    first.start()
    while lim.waiting < 1:
        time.sleep(0.002)
    admitted: list[int] = []
    threads = _queue_up(lim, [0], admitted)  # now two wait, the doomed one at the head
    cancel.set()
    first.join(5)
    assert failed and lim.waiting == 1
    lim.release(held, None, rate_limited=False, retry_after=None)
    for t in threads:
        t.join(5)
    assert admitted == [0] and lim.in_flight == 0


def test_calls_inherit_the_priority_they_were_made_under_also_on_fan_out_helpers():
    from backends.llm.fanout import fan_out
    from backends.llm.limits import call_priority, current_priority

    assert current_priority() == 0
    barrier = threading.Barrier(4, timeout=5)  # four items at once: three of them on the pool's helpers

    def item(_):
        barrier.wait()
        return current_priority(), threading.get_ident()

    with call_priority(7):
        seen = fan_out(item, range(4), width=4)
    assert {p for p, _ in seen} == {7} and len({t for _, t in seen}) == 4
    assert current_priority() == 0
