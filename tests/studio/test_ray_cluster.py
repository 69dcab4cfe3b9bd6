"""A real two-node Ray cluster on this machine (``ray start --head``, then a second ``ray start --address``): an
experiment run against it through ``RAY_ADDRESS`` finishes every unit, its units ran on both nodes, each asking a
fraction of a CPU, and their records are on the driver. The nodes are ended when the test ends."""

from __future__ import annotations

import pytest

from tests.conftest import DEMO

ray = pytest.importorskip("ray", reason="ray is an optional extra (make ray)")

EXPERIMENT = f'''name = "cluster"
dataset = "{DEMO}"
users = ["1000", "1001"]
methods = ["vanilla-log"]
baseline = "vanilla"
tasks = ["build"]
concurrency = 4
'''


@pytest.mark.slow(seconds=45)
def test_units_of_an_experiment_land_on_both_nodes_of_a_two_node_cluster(tmp_path, monkeypatch):
    from studio.remote import ray_executor
    from testkit.ray_cluster import local_cluster
    from testkit.run_experiment import open_experiment, run

    path = tmp_path / "cluster.toml"
    path.write_text(EXPERIMENT, encoding="utf-8")
    executors = []

    def on_cluster(ws):
        executors.append(ray_executor(ws, cpus_per_unit=0.5))  # two units at once on each one-CPU node
        return executors[0]

    with local_cluster(nodes=2, cpus=1) as address:
        monkeypatch.setenv("RAY_ADDRESS", address)
        try:
            line = run(tmp_path / "pal", path, executor=on_cluster)
            nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        finally:
            ray.shutdown()
    ws, exp, plan = open_experiment(tmp_path / "pal", path)
    n = len(plan.job.units)  # every session of each user built
    assert line.startswith(f"[{n}/{n}]"), line
    placed = executors[0].placements
    assert len(placed) == n and set(placed.values()) == nodes and len(nodes) == 2
    assert all(u.status == "done" for u in ws.jobs.store.units(exp.job_id()))
    assert ws.memory.find_build(str(DEMO.resolve()), "1000", "vanilla-log")  # the records came back to the driver
