"""fan_out: results in item order, at most `width` at once, the first failure in item order, nothing started after a
failure or a cancel; width 1 runs in the caller's thread exactly as a loop."""

import threading
import time

import pytest

from backends.llm.errors import Cancelled
from backends.llm.fanout import fan_out


class Meter:
    def __init__(self):
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.started: list[int] = []

    def __call__(self, item, delay=0.02, fail=()):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.started.append(item)
        time.sleep(delay * (1 + (item % 3)))  # out-of-order finishing
        with self.lock:
            self.now -= 1
        if item in fail:
            raise ValueError(f"item {item}")
        return item * 10


def test_results_in_item_order_with_width_in_flight():
    meter = Meter()
    assert fan_out(meter, range(12), width=4) == [i * 10 for i in range(12)]
    assert meter.most == 4
    assert sorted(meter.started) == list(range(12))


def test_width_one_is_a_loop_in_the_callers_thread():
    threads, order = set(), []

    def fn(item):
        threads.add(threading.get_ident())
        order.append(item)
        return item

    assert fan_out(fn, [3, 1, 2], width=1) == [3, 1, 2]
    assert order == [3, 1, 2] and threads == {threading.get_ident()}


def test_first_failure_in_item_order_and_nothing_started_after_it():
    meter = Meter()
    with pytest.raises(ValueError, match="item 2"):
        fan_out(lambda i: meter(i, fail={2, 3}), range(20), width=3)
    assert len(meter.started) < 20  # the items after the failure were never started
    assert meter.now == 0  # every started item ended before the error came back


def test_cancel_starts_nothing_more_and_raises():
    cancel = threading.Event()
    started = []

    def fn(item):
        started.append(item)
        if item == 1:
            cancel.set()
        time.sleep(0.02)
        return item

    with pytest.raises(Cancelled):
        fan_out(fn, range(10), width=2, cancel=cancel)
    assert len(started) <= 3
    cancel_now = threading.Event()
    cancel_now.set()
    with pytest.raises(Cancelled):
        fan_out(fn, range(3), width=1, cancel=cancel_now)


def test_helpers_come_from_one_bounded_pool_kept_between_calls():
    from backends.llm.fanout import POOL_THREADS, pool_threads

    meter = Meter()
    fan_out(lambda i: meter(i, delay=0.005), range(8), width=4)
    kept = pool_threads()
    before = threading.active_count()
    for _ in range(20):  # sequential fan-outs reuse the kept helpers: no thread per item or per call
        assert fan_out(lambda i: meter(i, delay=0.001), range(8), width=4) == [i * 10 for i in range(8)]
    assert pool_threads() == kept <= POOL_THREADS and threading.active_count() <= before


def test_a_fan_out_inside_an_item_progresses_with_every_helper_busy(monkeypatch):
    import backends.llm.fanout as fanout

    monkeypatch.setattr(fanout, "_POOL", fanout._Pool(1))  # one helper for the whole process
    inner_threads = set()

    def inner(i):
        inner_threads.add(threading.get_ident())
        time.sleep(0.005)
        return i

    def outer(i):
        return sum(fan_out(inner, range(4), width=4))

    assert fan_out(outer, range(6), width=6) == [6] * 6  # the callers work through their items themselves
    assert fanout._POOL.threads == 1 and len(inner_threads) <= 2
