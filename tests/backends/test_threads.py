"""The local server's thread count: chosen from the measured load of the other processes, or as configured."""

import pytest

from backends.llm import threads as threads_mod
from backends.llm.threads import CpuLoad, choose_threads, measure_load, resolve_threads


@pytest.mark.parametrize(("cores", "others", "expected"), [
    (2, 0.0, 2),   # quiet 2-core machine: both cores
    (2, 0.2, 2),   # a little background work still leaves both at least 75 % idle
    (2, 0.4, 1),   # one core is no longer free enough: one thread, never two that wait for each other
    (2, 1.0, 1),   # another test worker or build on one core (measured: two threads ~10x slower here)
    (2, 2.0, 1),   # fully busy: still at least one
    (1, 0.0, 1),
    (16, 3.3, 12),
    (8, 8.5, 1),   # more busy than cores (run queue): at least one
])
def test_threads_follow_the_free_cores(cores, others, expected):
    threads, why = choose_threads(cores, others)
    assert threads == expected
    assert why.startswith(f"auto: {expected} thread") and f"{others:.2f}" in why


def test_a_busy_machine_says_why_it_gets_one_thread():
    assert "machine busy" in choose_threads(2, 1.9)[1]
    assert "all 2 cores are free" in choose_threads(2, 0.1)[1]


def test_configured_threads_are_used_as_given_without_measuring(monkeypatch):
    monkeypatch.setattr(threads_mod, "measure_load", lambda *a, **k: pytest.fail("measured"))
    assert resolve_threads(3) == (3, "configured: 3 threads")


def test_auto_subtracts_this_process_and_falls_back_without_proc(monkeypatch):
    monkeypatch.setattr(threads_mod, "measure_load", lambda *a, **k: CpuLoad(cores=2, busy=1.1, own=1.0, window_s=0.5))
    assert resolve_threads("auto")[0] == 2  # the busy core was this process's own work
    monkeypatch.setattr(threads_mod, "measure_load", lambda *a, **k: None)
    threads, why = resolve_threads("auto")
    assert 1 <= threads <= 2 and "CPU load unknown" in why


def test_the_measurement_reads_this_machine():
    load = measure_load(0.1)
    assert load is not None and load.cores >= 1 and 0 <= load.own <= load.busy <= load.cores + 0.01
