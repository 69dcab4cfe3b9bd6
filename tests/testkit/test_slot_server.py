"""A simulation against the fake N-slot server asks each call once: every user turn and every assistant turn is one
request, accepted on its first try (no draft sent back, no turn composed, no structured answer re-asked) — so a
bench built on the server measures the protocol its plan counts, not retries."""

from __future__ import annotations

import pytest

from palset.loader import load_dataset
from sim.batch import plan_runs, run_batch
from sim.store import run_id_for
from testkit.fault_server import serving
from testkit.release import make_release
from testkit.slot_server import SlotServer
from testkit.workspace import make_workspace


@pytest.mark.slow(seconds=8)
@pytest.mark.parametrize("mode", ["fixed", "free"])
def test_a_simulation_against_the_slot_server_asks_each_call_once(tmp_path, mode):
    dataset = load_dataset(make_release(tmp_path / "ds", users=1, sessions=2, logs_per_session=4, turns=10,
                                        query_sessions=1))
    server = SlotServer(latency=0.0, slots=4)
    with serving(server.httpd):
        ws = make_workspace(tmp_path / "pal", env={
            "PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url,
            "PAL_DEFAULT_MODEL": "slot-model", "PAL_EMBEDDER": "hash"}, secrets={"cache": False})
        specs = plan_runs(dataset, ["vanilla", "vanilla-log"], seed="once")
        if mode == "free":
            specs = [s.model_copy(update={"mode": "free"}) for s in specs]
        summary = run_batch(ws, dataset, specs, ws.llm, 2)
    assert summary.finished == len(specs) == 4 and summary.failed == 0
    utterances = [u for s in specs for u in ws.sims.load(run_id_for(s)).utterances]
    assert len(utterances) == summary.utterances_written > 0
    assert all(u.attempts == 1 and not u.fallback for u in utterances), [
        (u.side, u.act, u.attempts, u.fallback) for u in utterances if u.attempts != 1 or u.fallback]
    assert server.counters["requests"] == summary.llm_calls == len(utterances)
    with ws.db.read() as conn:
        failed = conn.execute("SELECT COUNT(*) FROM llm_calls WHERE structured_ok = 0 OR attempts > 1").fetchone()[0]
    assert failed == 0
