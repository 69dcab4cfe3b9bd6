"""Record bundles: what a unit changed, applied on the driver without losing what is stored under it."""

from __future__ import annotations

from studio.records import Bundle, all_rows, apply_rows, changed_files, changed_rows, export_rows, file_digests
from testkit.workspace import make_workspace
from tests.conftest import DEMO


def test_a_changed_build_row_keeps_its_stages_and_items_and_calls_get_new_ids(tmp_path):
    ws = make_workspace(tmp_path / "driver", env={"PAL_EMBEDDER": "hash"})
    ds = ws.dataset(DEMO)
    builder = ws.open_builder(ds, "1000", "vanilla-log", method_config={})
    builder.run(until_session=0)
    worker = make_workspace(tmp_path / "worker", env={"PAL_EMBEDDER": "hash"})
    sel = {t: ("build_id=?", [builder.build_id]) for t in ("memory_builds", "memory_build_stages", "memory_items")}
    apply_rows(worker.db, export_rows(ws.db, sel))
    before, files = all_rows(worker.db), file_digests(worker.home)
    worker.open_builder(worker.dataset(DEMO), "1000", "vanilla-log", method_config={}).run(until_session=1)
    out = Bundle(rows=changed_rows(worker.db, before), files=changed_files(worker.home, files))
    assert [r["stage"] for r in out.rows["memory_build_stages"]] == [2, 3]
    assert len(out.rows["memory_builds"]) == 1  # its updated_at changed
    apply_rows(ws.db, out.rows)
    assert ws.memory.done_stages(builder.build_id) == [0, 1, 2, 3]  # stages 0-1 survived the build row's update
    assert len(ws.memory.items_as_of(builder.build_id, 3)) == len(worker.memory.items_as_of(builder.build_id, 3))
    apply_rows(ws.db, {"llm_calls": [{"id": 1, "ts": 1.0, "role": "judge", "provider": "fake", "endpoint": "e",
                                      "model": "m"}] * 2})
    assert ws.runs.totals().calls == 2  # worker-local ids are dropped: both calls are kept
