"""A job's status and ETA as pages and commands show them."""

from jobs.types import JobSummary


def summary(**kw) -> JobSummary:
    base = dict(job_id="j", kind="k", title="t", created_by="me", pool="app", cancelled=False, created_at=0,
                updated_at=0, counts={"queued": 0, "running": 0, "done": 0, "failed": 0, "cancelled": 0}, total=0,
                progress=0.0, seconds_done=0.0)
    return JobSummary(**{**base, **kw})


def test_eta_weighs_each_kind_by_its_own_finished_units():
    s = summary(counts={"queued": 6, "running": 0, "done": 4, "failed": 0, "cancelled": 0}, total=10,
                seconds_done=4 * 1.0 + 0, by_kind={"build": (4, 4.0, 2), "sim": (0, 0.0, 4)})
    assert s.eta(2) is None  # no sim has finished and nothing says how long one takes
    # builds: 2 left × 1 s; sims: the plan's 10 s each, scaled by the builds' actual/planned time (1 s / 2 s)
    assert s.eta(2, {"build": 2.0, "sim": 10.0}) == (2 * 1.0 + 4 * 10.0 * 0.5) / 2
    assert summary(counts={**s.counts, "done": 0}, total=6).eta(2) is None  # nothing finished: no ETA


def test_status_running_blocked_failed_done():
    counts = {"queued": 0, "running": 0, "done": 0, "failed": 0, "cancelled": 0}
    assert summary(counts={**counts, "queued": 2, "done": 1}, total=3).status == "running"
    assert summary(counts={**counts, "queued": 2, "failed": 1}, total=3, blocked=2).status == "failed"
    assert summary(counts={**counts, "done": 3}, total=3).status == "done"
    assert summary(counts={**counts, "cancelled": 3}, total=3, cancelled=True).status == "cancelled"
    assert "ETA" not in summary(counts={**counts, "done": 3}, total=3).line()
