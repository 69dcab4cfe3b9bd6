"""Discarding simulation runs (``studio/discard.py``, ``pal runs discard``): the run, the judgments that read it and
its simulator fidelity go, in one transaction and audited, so the command that made them records them anew; a run
somebody drives or a review batch shows is refused, and then nothing at all is deleted.

Uses the bundled demo users (``data/demo``) with the hash embedder and scripted LLMs (``testkit.worked``)."""

from __future__ import annotations

import pytest

from palset.loader import load_dataset
from studio.discard import DiscardRefused, discard_runs
from testkit.workspace import make_workspace
from tests.conftest import DEMO


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home with gold and rag-turn runs of user 1000's first query topic, judged, checked, and (``review``)
    shown in review batches."""
    from testkit.worked import fill_home

    monkeypatch.setenv("PAL_EMBEDDER", "hash")

    def make(review: bool):
        ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
        fill_home(ws, load_dataset(DEMO), ["1000"], review=review, experiment=False)
        return ws
    return make


def _counts(ws, run_id: str) -> tuple[int, int, int]:
    judged = [j for j in ws.evals.judgments() if run_id in (j.run_a, j.run_b)]
    return ws.sims.count_utterances(run_id), len(judged), int(ws.simfidelity.of_run(run_id) is not None)


def test_a_run_goes_with_its_judgments_and_fidelity_and_nothing_else(home):
    ws = home(review=False)
    runs = {r["method"]: r["run_id"] for r in ws.sims.list()}
    gone, kept = runs["rag-turn"], runs["gold"]
    before_kept = _counts(ws, kept)
    utterances, judged, checked = _counts(ws, gone)
    assert utterances > 0 and judged > 0 and checked == 1  # the fixture made all of it
    calls_before = ws.runs.totals().calls
    assert ws.runs.totals(run_id=gone).calls > 0
    (done,) = discard_runs(ws, [gone], actor="carol.researcher")
    assert ws.runs.totals(run_id=gone).calls == 0 and done.calls > 0  # a run made again counts only its own calls
    assert ws.runs.totals().calls == calls_before  # what they cost is still counted
    assert (done.run_id, done.method, done.user_id, done.utterances, len(done.judgments), done.fidelity) == (
        gone, "rag-turn", "1000", utterances, judged, 1)
    assert not ws.sims.exists(gone) and _counts(ws, gone) == (0, 0, 0)
    assert ws.sims.exists(kept) and _counts(ws, kept)[::2] == before_kept[::2]  # its own turns and checks stay
    assert ws.evals.judgments() == [j for j in ws.evals.judgments() if gone not in (j.run_a, j.run_b)]
    (entry,) = ws.audit.entries(action="runs.discard")
    assert (entry.actor, entry.target, entry.detail["judgments"]) == ("carol.researcher", gone, done.judgments)
    with pytest.raises(DiscardRefused, match="no such run"):
        discard_runs(ws, [gone], actor="carol.researcher")


def test_the_job_units_that_made_judged_or_checked_a_run_are_queued_again(home):
    """The command that made a run resubmits the same job (its id follows from its runs): units still done would be
    skipped, and the discarded run never made again (what happened re-recording the demo workspace's runs)."""
    from jobs.types import JobSpec, UnitSpec

    ws = home(review=False)
    runs = {r["method"]: r["run_id"] for r in ws.sims.list()}
    gone, kept = runs["rag-turn"], runs["gold"]
    keys = [f"sim/{gone}", f"sim/{kept}", f"judge/{kept}/{gone}/requirement", f"simfid/{gone}", f"simfid/{kept}"]
    ws.jobs.store.submit(JobSpec(job_id="redo", kind="simulate", title="t", pool="cli",
                                 units=[UnitSpec(key=k, kind="sim.run") for k in keys]))
    while (unit := ws.jobs.store.claim("host:1:t", 60, job_id="redo")) is not None:
        assert ws.jobs.store.finish(unit.unit_id, "host:1:t", {"done": True}, 1.0)
    (done,) = discard_runs(ws, [gone], actor="cli")
    status = {u.unit_id.removeprefix("redo/"): u.status for u in ws.jobs.store.units("redo")}
    assert status == {f"sim/{gone}": "queued", f"sim/{kept}": "done", f"judge/{kept}/{gone}/requirement": "queued",
                      f"simfid/{gone}": "queued", f"simfid/{kept}": "done"}
    assert sorted(done.requeued) == sorted(f"redo/{k}" for k in keys if gone in k)
    again = ws.jobs.store.claim("host:1:t", 60, job_id="redo")
    assert again is not None and gone in again.unit_id and again.result is None  # runnable again


def test_a_driven_or_reviewed_run_is_refused_and_nothing_is_deleted(home):
    ws = home(review=True)
    runs = {r["method"]: r["run_id"] for r in ws.sims.list()}
    before = {run_id: _counts(ws, run_id) for run_id in runs.values()}
    with pytest.raises(DiscardRefused, match="review batch b-"):  # the fixture's batches show both runs
        discard_runs(ws, [runs["gold"]], actor="cli")
    assert ws.sims.take_lease(runs["rag-turn"], "tab-7")
    with pytest.raises(DiscardRefused) as refused:
        discard_runs(ws, [runs["rag-turn"], "run-1000-gold-0000000000"], actor="cli")
    assert "tab-7 is driving it" in str(refused.value) and "run-1000-gold-0000000000: no such run" in str(refused.value)
    assert {run_id: _counts(ws, run_id) for run_id in runs.values()} == before
    assert ws.audit.entries(action="runs.discard") == []


def test_pal_runs_discard_says_what_would_go_then_discards_with_yes(home, monkeypatch, capsys):
    from cli import context
    from cli.main import main

    ws = home(review=False)
    monkeypatch.setenv("PAL_HOME", str(ws.home))
    context._open.cache_clear()
    run_id = next(r["run_id"] for r in ws.sims.list() if r["method"] == "gold")
    utterances, judged, _ = _counts(ws, run_id)
    assert main(["runs", "discard", run_id]) == 1
    out, err = capsys.readouterr()
    assert f"would discard {run_id} ({utterances} utterances) and {judged} judgment(s)" in out and "--yes" in err
    assert ws.sims.exists(run_id)
    assert main(["runs", "discard", run_id, "--yes"]) == 0
    assert f"discarded {run_id} ({utterances} utterances, {judged} judgment(s), 1 " in capsys.readouterr().out
    assert not ws.sims.exists(run_id)
    assert main(["runs", "discard", run_id, "--yes"]) == 2
    assert "no such run" in capsys.readouterr().err
    context._open.cache_clear()
