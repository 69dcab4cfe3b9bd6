"""The ready-queue of the job store: whatever happens to units (claims, finishes, failures with attempts left,
releases, cancels, retries, requeues of dead workers and of discarded runs), a claim takes exactly the unit the
definition names — the first queued unit, in (job created, job, unit order), of an uncancelled job whose
dependencies are all done — and reads it from an index in that order, not by testing every queued unit."""

from __future__ import annotations

import random

import pytest

from jobs.store import JobStore
from jobs.types import JobSpec, UnitSpec
from testkit.workspace import make_workspace

# the definition of the next runnable unit (the claim's query before the ready-queue existed)
NEXT = ("SELECT u.unit_id FROM job_units u JOIN jobs j USING (job_id) WHERE u.status='queued' AND j.cancelled=0 "
        "AND NOT EXISTS (SELECT 1 FROM job_deps d JOIN job_units p ON p.unit_id=d.dep_id WHERE d.unit_id=u.unit_id "
        "AND p.status!='done') {where} ORDER BY j.created_at, u.job_id, u.seq LIMIT 1")


@pytest.fixture
def store(tmp_path) -> JobStore:
    return make_workspace(tmp_path / "pal").jobs.store


def dag_job(job_id: str, rng: random.Random, n: int = 30, pool: str = "cli") -> JobSpec:
    """Units with up to three dependencies each on earlier units (chains, fans in and out)."""
    units = [UnitSpec(key=f"k{i}", kind="test.step", max_attempts=2,
                      deps=[f"k{d}" for d in rng.sample(range(i), min(i, rng.randint(0, 3)))]) for i in range(n)]
    return JobSpec(job_id=job_id, kind="test", title=job_id, units=units, pool=pool)


def expected(store: JobStore, job_id: str | None = None) -> str | None:
    with store.db.read() as conn:
        row = conn.execute(NEXT.format(where="AND u.job_id=?" if job_id else ""),
                           (job_id,) if job_id else ()).fetchone()
    return row[0] if row else None


def running(store: JobStore) -> list[str]:
    with store.db.read() as conn:
        return [r[0] for r in conn.execute("SELECT unit_id FROM job_units WHERE status='running' ORDER BY unit_id")]


def step(store: JobStore, rng: random.Random, jobs: list[str]) -> None:
    """One random thing that happens to a unit or a job."""
    held = running(store)
    what = rng.choice(["claim", "claim", "claim", "finish", "finish", "finish", "fail", "release", "cancel", "retry",
                       "expire", "discard"])
    if what == "claim" or not held and what in ("finish", "fail", "release", "expire"):
        job = rng.choice([None, *jobs])
        want = expected(store, job)
        got = store.claim("w:1:a", 60, job_id=job)
        assert (got.unit_id if got else None) == want
    elif what == "finish":
        store.finish(rng.choice(held), "w:1:a", {"ok": 1}, 0.1)
    elif what == "fail":
        store.fail(rng.choice(held), "w:1:a", "boom", 0.1)
    elif what == "release":
        store.release(rng.choice(held), "w:1:a")
    elif what == "cancel" and rng.random() < 0.3:
        store.cancel(rng.choice(jobs))
    elif what == "retry":
        store.retry(rng.choice(jobs))
    elif what == "expire" and held:
        with store.db.write() as conn:
            conn.execute("UPDATE job_units SET lease_until=0 WHERE unit_id=?", (rng.choice(held),))
        store.requeue_expired()
    elif what == "discard":
        with store.db.write() as conn:
            done = [r[0] for r in conn.execute("SELECT unit_id FROM job_units WHERE status='done'")]
            if done:
                store.requeue_reading_in(conn, rng.choice(done).split("/", 1)[1])


@pytest.mark.parametrize("seed", range(3))
def test_every_claim_takes_the_unit_the_definition_names(store, seed):
    rng = random.Random(seed)
    jobs = [store.submit(dag_job(f"job{i}", rng)) for i in range(3)]
    for _ in range(400):
        step(store, rng, jobs)
        assert store.reindex() == 0  # the queue was in step: nothing to add or remove


def test_a_claim_reads_an_index_in_claim_order(store):
    store.submit(dag_job("big", random.Random(1), n=200))
    for kw in ({}, {"job_id": "big"}, {"pool": "cli"}):
        plan = " | ".join(store.claim_plan(**kw))
        assert "job_ready_" in plan and "TEMP B-TREE" not in plan and "SCAN job_units" not in plan, (kw, plan)


def test_units_written_around_the_store_become_claimable_once_reindexed(store):
    store.submit(JobSpec(job_id="j", kind="test", title="j", pool="cli", units=[UnitSpec(key="a", kind="test.step")]))
    with store.db.write() as conn:  # as a bundle's import writes rows: into the tables, not through the store
        conn.execute("INSERT INTO job_units (unit_id, job_id, seq, kind, label, payload, status) "
                     "VALUES ('j/b', 'j', 1, 'test.step', 'b', '{}', 'queued')")
        conn.execute("DELETE FROM job_ready")
    assert store.claim("w:1:a", 60) is None
    assert store.reindex() == 2
    assert [store.claim("w:1:a", 60).unit_id for _ in range(2)] == ["j/a", "j/b"]


def test_a_units_height_is_the_longest_chain_of_units_waiting_on_it():
    from jobs.graph import chain_heights

    edges = [("b", "a"), ("c", "b"), ("d", "a"), ("e", "c"), ("e", "d"), ("x", "y"), ("y", "x")]
    assert chain_heights(["a", "b", "c", "d", "e", "f", "x", "y"], edges) == {
        "a": 3, "b": 2, "c": 1, "d": 1, "e": 0, "f": 0, "x": 0, "y": 0}  # a cycle never runs: 0
    long = [(f"s{i + 1}", f"s{i}") for i in range(5000)]  # a long chain: no recursion limit
    assert chain_heights([f"s{i}" for i in range(5001)], long)["s0"] == 5000
