"""Independent calls in flight together, results in order: :func:`fan_out`.

Work whose pieces do not depend on each other (the log-graph windows of a session, one summary per situation, the
per-cluster principles, the per-situation calls of a synthesis step, the samples of a FairEval judgment) maps a
function over its items with :func:`fan_out`. At most :meth:`backends.llm.client.LLMClient.width` items run at once
— the endpoint's concurrency as its limiter allows it now (configured limits, halved on a 429), else the slots the
server declares (the bundled server's ``parallel``, a llama.cpp server's ``/props``), else one: a hosted endpoint
nobody configured is never sent more at once than before. The limiter still admits each request.

Results come back in the order of the items, and the caller merges everything else it keeps (notes, accounting) in
that order too, so a piece of work done concurrently stores exactly what it stored done one call after another.
The first failure in item order is raised once the items already running have ended; no item starts after a
failure or a cancel (items not started then raise :class:`Cancelled`), so a stage or step stopped half way keeps
what its finished calls stored (the response cache, a synthesis step's units) and resumes without asking again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from backends.llm.errors import Cancelled

T = TypeVar("T")
R = TypeVar("R")


def fan_out(fn: Callable[[T], R], items: Sequence[T], width: int, cancel: threading.Event | None = None,
            name: str = "fanout") -> list[R]:
    """``[fn(item) for item in items]``, up to ``width`` at once (see the module docstring). ``width`` ≤ 1 or one
    item: run here, one after another, exactly as a loop would."""
    items = list(items)
    if width <= 1 or len(items) <= 1:
        out: list[R] = []
        for item in items:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{name}: cancelled before item {len(out) + 1} of {len(items)}")
            out.append(fn(item))
        return out
    results: dict[int, R] = {}
    errors: dict[int, BaseException] = {}
    running: dict[Future[R], int] = {}
    pending = iter(enumerate(items))
    with ThreadPoolExecutor(max_workers=min(width, len(items)), thread_name_prefix=name) as pool:
        def start_more() -> None:
            while len(running) < width and not errors and not (cancel is not None and cancel.is_set()):
                nxt = next(pending, None)
                if nxt is None:
                    return
                running[pool.submit(fn, nxt[1])] = nxt[0]

        start_more()
        while running:
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in finished:
                index = running.pop(future)
                error = future.exception()
                if error is not None:
                    errors[index] = error
                else:
                    results[index] = future.result()
            start_more()
    if errors:
        raise errors[min(errors)]
    if len(results) < len(items):
        raise Cancelled(f"{name}: cancelled after {len(results)} of {len(items)} items")
    return [results[i] for i in range(len(items))]
