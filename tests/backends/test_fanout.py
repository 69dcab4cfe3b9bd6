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
