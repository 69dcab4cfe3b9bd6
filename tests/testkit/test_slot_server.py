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
from testkit.slot_server import SlotServer, timeline_figures
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


def test_the_timeline_says_how_busy_the_slots_were():
    """Two slots: both busy for a second, then one for a second more (a tail), then a gap-free end."""
    timeline = [(0.0, 0.0, 1.0), (0.0, 0.0, 1.0), (1.0, 1.0, 2.0)]
    f = timeline_figures(timeline, slots=2)
    assert f.requests == 3 and f.span_s == pytest.approx(2.0)
    assert f.busy_share == pytest.approx(0.75) and f.mean_in_flight == pytest.approx(1.5)
    assert f.hold_ms == pytest.approx(1000) and f.queued_ms == 0
    assert f.gaps_s == 0 and f.tail_s == 0  # one of two slots is half, not fewer than half
    four = timeline_figures([(0.0, 0.0, 3.0), (0.0, 0.0, 1.0), (1.0, 1.5, 2.0), (0.0, 0.0, 1.0), (0.0, 0.0, 1.0),
                             (2.5, 2.5, 4.0)], slots=4)
    # one slot held over 1–1.5 s and 2–2.5 s (gaps), and from 3 s to the end (the tail)
    assert four.queued_ms == 0 and four.gaps_s == pytest.approx(1.0) and four.tail_s == pytest.approx(1.0)
    assert timeline_figures([], slots=4).requests == 0


def test_the_server_keeps_each_requests_times_until_read():
    server = SlotServer(latency=0.05, slots=2)
    with serving(server.httpd):
        body = {"model": "slot-model", "messages": [{"role": "user", "content": "hello"}]}
        for _ in range(2):
            server.complete(body)
        first = server.timeline()
        assert len(first) == 2 and server.timeline() == []
    for arrived, taken, done in first:
        assert arrived <= taken and done - taken >= 0.05
