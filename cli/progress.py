"""Progress lines on stderr for long CLI commands: how much of the work is done, and about how long is left."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def progress_printer(label: str) -> Callable[..., None]:
    """A callback printing ``[label done/total] detail (about N s left)``, the time left extrapolated from the pace
    since the printer was made (stderr, so a ``--json`` printout on stdout stays clean)."""
    started = time.monotonic()

    def progress(done: int, total: int, detail: str = "") -> None:
        eta = (time.monotonic() - started) / max(done, 1) * (total - done)
        text = f" {detail}" if detail else ""
        print(f"[{label} {done}/{total}]{text} (about {eta:.0f} s left)", file=sys.stderr, flush=True)

    return progress
