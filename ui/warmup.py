"""Precompute what the demo's tour shows, in the background of the app's first start, so its stops open warm.

A tour stop on the Memory page reads a build's vector index and the embedder: an imported build comes without
vectors (a bundle carries records, not embeddings), so its first retrieval embeds every stored version, and the
first query loads the embedding model — half a minute and more on a busy two-core machine, in front of a person.
:func:`warm_tour` does that work once, right after the app opens its workspace: the embedder, and the index of every
build a memory stop shows (its method, and the method it is compared with). Builds of methods that need no LLM are
made as the page would make them; a build an LLM would have to make is left alone (the stop says what to run).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from memory.methods import get_method_class
from palset.dataset import Dataset, dataset_key
from palset.loader import load_dataset
from palset.names import PROJECT_ROOT
from studio.workspace import Workspace
from ui.tour import load_tour

log = logging.getLogger(__name__)
DEMO_ENV = "PAL_DEMO_WORKSPACE"  # the bundle make run imports on first start; its folder holds the tour
_STARTED: set[str] = set()  # homes warmed by this process
_LOCK = threading.Lock()


def tour_builds(dataset: Dataset) -> list[tuple[str, str]]:
    """(user, method) of every memory a tour stop shows, in tour order, each once."""
    stops, problem = load_tour(dataset)
    if problem:
        log.warning("tour of %s not warmed: %s", dataset.root, problem)
    wanted: list[tuple[str, str]] = []
    for stop in stops:
        if stop.page != "memory" or not stop.user:
            continue
        for method in (stop.method, stop.compare if stop.tab == "Retrieval" else None):
            if method and (stop.user, method) not in wanted:
                wanted.append((stop.user, method))
    return wanted


def warm_build(ws: Workspace, dataset: Dataset, uid: str, method: str) -> str:
    """Index one shown build (building it first when it needs no LLM); what was done, in words."""
    dkey = dataset_key(dataset.root)
    stored = ws.memory.find_build(dkey, uid, method)
    if stored is None and get_method_class(method).uses_llm:
        return f"{method} of {uid}: not built (an LLM build; left to the page)"
    builder = ws.open_user_builder(dkey, dataset.users[uid], method)
    if stored is None or len(builder.store.done_stages(builder.build_id)) < builder.total_stages:
        builder.run()
    builder.ensure_index()
    builder.retrieve(dataset.users[uid].name, "requirement")  # loads the embedder the stop's query needs
    return f"{method} of {uid}: indexed"


def warm_tour(ws: Workspace, root: Path) -> list[str]:
    """Warm every build the tour of the dataset at ``root`` shows; each failure is logged and the rest go on."""
    done: list[str] = []
    dataset = load_dataset(root)
    for uid, method in tour_builds(dataset):
        if uid not in dataset.users:
            continue
        start = time.perf_counter()
        try:
            done.append(warm_build(ws, dataset, uid, method))
        except Exception:  # a build that cannot be warmed is the page's to report; the others still warm
            log.exception("warming the tour's %s memory of %s failed", method, uid)
            continue
        log.info("tour warm-up: %s in %.1f s", done[-1], time.perf_counter() - start)
    return done


def start_warm_tour(ws: Workspace, root: Path) -> threading.Thread:
    """:func:`warm_tour` on a daemon thread (the app serves meanwhile; a page opened first does the same work)."""
    thread = threading.Thread(target=warm_tour, args=(ws, root), name="pal-tour-warmup", daemon=True)
    thread.start()
    return thread


def start_demo_warmup(ws: Workspace, env: dict[str, str] | None = None) -> threading.Thread | None:
    """Warm the tour of the demo workspace (``PAL_DEMO_WORKSPACE``, beside its ``tour.json``) once per process and
    home; None when there is nothing to warm or it was started already."""
    bundle = (os.environ if env is None else env).get(DEMO_ENV)
    if not bundle or ws.read_only:
        return None
    path = Path(bundle) if Path(bundle).is_absolute() else PROJECT_ROOT / bundle
    if not (path.parent / "tour.json").is_file():
        return None
    with _LOCK:
        if str(ws.home) in _STARTED:
            return None
        _STARTED.add(str(ws.home))
    return start_warm_tour(ws, path.parent)
