"""The Ray executor on a local Ray instance: one small experiment gives exactly the records the thread executor
gives — every utterance, judgment sample and task result — with no shared database (units ship their records)."""

from __future__ import annotations

import pytest

from backends.paths import StatePaths
from tests.protocol.test_experiment import FILE, records

ray = pytest.importorskip("ray", reason="ray is an optional extra (make ray)")
pytestmark = pytest.mark.slow


@pytest.fixture
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow(seconds=14)
def test_ray_and_threads_give_identical_records(tmp_path, local_ray):
    from studio.remote import ray_executor
    from testkit.run_experiment import run

    assert run(tmp_path / "threads", FILE).startswith("[40/40]")
    line = run(tmp_path / "ray", FILE, executor=ray_executor)
    assert line.startswith("[40/40]"), line
    a, b = records(tmp_path / "threads"), records(tmp_path / "ray")
    assert a == b and len(a["turns"]) > 0 and len(a["judgments"]) == 8 and len(a["results"]) == 24
    calls = "SELECT COUNT(*), SUM(tokens_in), SUM(tokens_out) FROM llm_calls"
    import sqlite3

    with sqlite3.connect(StatePaths(tmp_path / "threads").runs_db) as t, sqlite3.connect(StatePaths(tmp_path / "ray").runs_db) as r:
        assert t.execute(calls).fetchone() == r.execute(calls).fetchone()  # every call accounted on the driver
