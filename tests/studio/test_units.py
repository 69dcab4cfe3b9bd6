"""The memory build unit reports, beside its progress, its calls in flight and the prompt tokens the server's cache
served — over real HTTP to a fake 4-slot server that reports its cache as llama.cpp does."""

from __future__ import annotations

from jobs.types import JobSpec
from palset.loader import load_dataset
from protocol.units import build_units
from studio.units import UnitEnv
from testkit.fault_server import serving
from testkit.slot_server import SlotServer
from testkit.workspace import make_workspace
from tests.conftest import DEMO


def test_a_memory_build_unit_shows_calls_in_flight_and_cached_tokens(tmp_path):
    server = SlotServer(latency=0.1, slots=4)
    with serving(server.httpd):
        ws = make_workspace(tmp_path / "pal", env={
            "PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url, "PAL_DEFAULT_MODEL": "slot-model",
            "PAL_EMBEDDER": "hash"}, secrets={"limits": {server.base_url: {"concurrency": 4}}})
        dataset = load_dataset(DEMO)
        lines: list[str] = []
        texts: list[str] = []
        spec = JobSpec(job_id="memory-test", kind="memory", title="build", pool="cli",
                       units=build_units(dataset, "1000", "h2memory", until=0))
        job_id = ws.jobs.submit(spec, env=UnitEnv(ws, ws.llm(), line=lines.append))
        original = ws.jobs.store.set_progress

        def recorded(uid, owner, fraction, text):
            texts.append(text)
            original(uid, owner, fraction, text)

        ws.jobs.store.set_progress = recorded
        ws.jobs.progress_s = 0.0  # every reading written: the session's calls may all end within one throttle period
        summary = ws.jobs.run(job_id, 1)
        ws.jobs.stop()
    assert summary.status == "done"
    assert [line.split(" · ")[0] for line in lines] == ["[1/2] 1000_sample0: logs", "[2/2] 1000_sample0: dialogue"]
    assert all("calls in flight" in line and "prompt tokens from the server's cache" in line for line in lines)
    in_flight = [int(t.split(" · ")[1].split()[0]) for t in texts if "calls in flight" in t]
    assert max(in_flight) > 1  # the session's log-graph windows / situations went out together
    assert texts[-1].startswith("1000_sample0: dialogue done · 0 calls in flight")
    totals = ws.runs.totals(run_id=ws.memory.find_build(str(DEMO.resolve()), "1000", "h2memory"))
    assert totals.tokens_reported == totals.tokens_in and totals.tokens_cached > 0
