"""The protocol's own work per LLM call does not grow with the users of an experiment: the run store's statements and
the SQLite instructions they take per call (a query over all of a job's units at every unit end, or a scan of every
user's records, would grow them) are about the same for one user and for four."""

from __future__ import annotations

import pytest

from backends.store import db as dbmod
from palset.loader import load_dataset
from protocol.calibration import Calibration
from protocol.config import ExperimentConfig
from protocol.plan import make_plan
from studio.units import UnitEnv
from testkit.fault_server import serving
from testkit.release import make_release
from testkit.slot_server import SlotServer
from testkit.workspace import make_workspace

SHAPE = {"sessions": 3, "logs_per_session": 4, "turns": 4, "query_sessions": 1, "topics": 1}
STEPS = 100  # SQLite VM instructions between two counts


class _Counter:
    """Statements and VM instructions of every run-store connection opened while it is installed."""

    def __init__(self) -> None:
        self.statements = 0
        self.steps = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        opened = dbmod.Database._open

        def counting(db: dbmod.Database):
            conn = opened(db)
            if db.path.name == "runs.sqlite":
                conn.set_trace_callback(self._statement)
                conn.set_progress_handler(self._step, STEPS)
            return conn

        monkeypatch.setattr(dbmod.Database, "_open", counting)

    def _statement(self, _sql: str) -> None:
        self.statements += 1

    def _step(self) -> int:
        self.steps += 1
        return 0


def _per_call(tmp_path, url: str, dataset, users: list[str], monkeypatch) -> tuple[float, float]:
    counter = _Counter()
    counter.install(monkeypatch)
    home = tmp_path / f"pal-{len(users)}"
    ws = make_workspace(home, env={"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": url,
                                   "PAL_DEFAULT_MODEL": "slot-model", "PAL_EMBEDDER": "hash"},
                        secrets={"cache": False, "limits": {url: {"concurrency": 8}}})
    try:
        exp = ExperimentConfig(name="scale", dataset=str(dataset.root), users=users,
                               methods=["h2memory", "vanilla-log", "rag-turn"], baseline="vanilla",
                               tasks=["build", "dialogue", "faireval"], k=1, concurrency=8)
        plan = make_plan(exp, dataset, ws.config, Calibration.load(ws.runs, ws.memory, ws.jobs.store))
        ws.jobs.submit(plan.job, env=UnitEnv(ws, ws.llm(session_id="scale")))
        counter.statements = counter.steps = 0
        summary = ws.jobs.run(plan.job.job_id, exp.concurrency)
        assert summary.status == "done", summary.errors
        calls = ws.runs.totals().calls
    finally:
        ws.jobs.stop()
    monkeypatch.undo()
    return counter.statements / calls, counter.steps * STEPS / calls


@pytest.mark.slow(seconds=60)
def test_run_store_work_per_call_does_not_grow_with_the_users(tmp_path, monkeypatch):
    dataset = load_dataset(make_release(tmp_path / "ds", users=4, **SHAPE))
    users = sorted(dataset.users)
    server = SlotServer(latency=0.0, slots=8)
    with serving(server.httpd):
        one = _per_call(tmp_path, server.base_url, dataset, users[:1], monkeypatch)
        four = _per_call(tmp_path, server.base_url, dataset, users, monkeypatch)
    assert four[0] <= 1.15 * one[0], (one, four)  # statements per call
    assert four[1] <= 1.3 * one[1], (one, four)  # SQLite instructions per call


def _stored(tmp_path, url: str, dataset, users: list[str], name: str) -> dict:
    """What one protocol run stored: each unit's result, each build's items and each simulation's utterances."""
    ws = make_workspace(tmp_path / name, env={"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": url,
                                              "PAL_DEFAULT_MODEL": "slot-model", "PAL_EMBEDDER": "hash"},
                        secrets={"cache": False, "limits": {url: {"concurrency": 1}}})
    try:
        exp = ExperimentConfig(name="prio", dataset=str(dataset.root), users=users,
                               methods=["h2memory", "vanilla-log"], baseline="vanilla",
                               tasks=["build", "dialogue", "faireval"], k=1, concurrency=4)
        plan = make_plan(exp, dataset, ws.config, Calibration.load(ws.runs, ws.memory, ws.jobs.store))
        ws.jobs.submit(plan.job, env=UnitEnv(ws, ws.llm(session_id="prio")))
        assert ws.jobs.run(plan.job.job_id, exp.concurrency).status == "done"
        units = ws.jobs.store.units(plan.job.job_id)
        builds = {u.result["build_id"] for u in units if u.kind == "memory.session"}
        runs = [r for u in units if u.kind == "sim.run" for r in u.result["runs"]]
        return {"results": {u.key: u.result for u in units},
                "items": {b: sorted(i.text for i in ws.memory.all_versions(b)) for b in builds},
                "turns": {r: [(t.turn_no, t.side, t.content) for t in ws.sims.load(r).utterances] for r in runs}}
    finally:
        ws.jobs.stop()


@pytest.mark.slow(seconds=25)
def test_calls_on_the_critical_path_first_store_exactly_what_a_run_in_arrival_order_stores(tmp_path, monkeypatch):
    """An endpoint of one slot, so every call queues and the units' heights decide who goes first: the protocol's
    records are the same as with every call at one priority (first come, first served)."""
    from jobs.engine import JobEngine

    dataset = load_dataset(make_release(tmp_path / "ds", users=2, **SHAPE))
    server = SlotServer(latency=0.0, slots=1)
    with serving(server.httpd):
        first = _stored(tmp_path, server.base_url, dataset, sorted(dataset.users), "prioritised")
        monkeypatch.setattr(JobEngine, "priority", lambda self, unit: 0)
        second = _stored(tmp_path, server.base_url, dataset, sorted(dataset.users), "arrival-order")
    assert first["results"] and first["items"] and all(first["turns"].values())
    assert first == second
