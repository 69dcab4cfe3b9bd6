"""A unit's progress is written at most every ``progress_s`` seconds, and its last report always is — so dozens
of workers reporting every call do not queue on the store's write lock, and a page still sees where a unit ended."""

from __future__ import annotations

import time

from jobs.units import ThrottledProgress


def test_reports_are_thinned_and_the_last_one_is_kept():
    written: list[tuple[float, str]] = []
    progress = ThrottledProgress(lambda f, text: written.append((f, text)), every=0.2)
    for i in range(50):
        progress.report(i / 50, f"step {i}")
    assert written == [(0.0, "step 0")]  # the first at once, the rest within the interval wait
    time.sleep(0.25)
    progress.report(0.99, "step 50")
    progress.report(1.0, "done")
    progress.flush()
    assert written == [(0.0, "step 0"), (0.99, "step 50"), (1.0, "done")]
    progress.flush()
    assert len(written) == 3  # nothing pending: nothing written again
