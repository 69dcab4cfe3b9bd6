"""Precompute what the demo's tour shows, in the background of the app's first start, so its stops open warm.

Every vector embedded here is kept in the home's embedding cache (:mod:`backends.store.embed_cache`): the indexed
items, every query the tour's Retrieval stops (and their other topics) ask, the fidelity statements. A later start of
the app, whose first view is a stop, then finds each vector there and loads no embedding model (torch) at all.

A tour stop on the Memory page reads a build's vector index and the embedder: an imported build comes without
vectors (a bundle carries records, not embeddings), so its first retrieval embeds every stored version, and the
first query loads the embedding model — half a minute and more on a busy two-core machine, in front of a person.
A Fidelity stop measures a method against the gold memory and the reference memories when no report of the current
definition is stored (a bundle recorded under an older one holds only stale reports): a minute and more of embedding.
:func:`warm_tour` does that work once, right after the app opens its workspace: the embedder first (the page's own
first view then waits on the load already under way instead of starting it), the index of every build a memory stop
shows (its method, and the method it is compared with), and the fidelity reports a Fidelity stop shows, stored so
every later process reads them. Builds of methods that need no LLM are made as the page would make them; a build an
LLM would have to make is left alone (the stop says what to run).
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from evaluation.fidelity.compute import StatementVectors
from evaluation.fidelity.service import measure_build, reference_reports
from memory.methods import get_method_class, is_oracle
from palset.dataset import Dataset, User, dataset_key
from palset.loader import load_dataset
from palset.names import PROJECT_ROOT
from studio.workspace import Workspace
from ui.fidelity import FIDELITY_BASELINE
from ui.tour import TourStop, load_tour

log = logging.getLogger(__name__)
DEMO_ENV = "PAL_DEMO_WORKSPACE"  # the bundle make run imports on first start; its folder holds the tour
FINISHED = "tour warm-up finished"  # the log line a bench waits for
_STARTED: set[str] = set()  # homes warmed by this process
_LOCK = threading.Lock()


def _stops(dataset: Dataset) -> list[TourStop]:
    stops, problem = load_tour(dataset)
    if problem:
        log.warning("tour of %s not warmed: %s", dataset.root, problem)
    return [s for s in stops if s.page == "memory" and s.user]


def tour_builds(dataset: Dataset) -> list[tuple[str, str]]:
    """(user, method) of every memory a tour stop shows, in tour order, each once."""
    wanted: list[tuple[str, str]] = []
    for stop in _stops(dataset):
        for method in (stop.method, stop.compare if stop.tab == "Retrieval" else None):
            if method and stop.user and (stop.user, method) not in wanted:
                wanted.append((stop.user, method))
    return wanted


def fidelity_method(stop: TourStop) -> str | None:
    """The method a Fidelity stop measures against gold: its own, or on the gold memory's page the method compared
    (else the one the Fidelity tab offers first)."""
    if not stop.method:
        return None
    return (stop.compare or FIDELITY_BASELINE) if is_oracle(stop.method) else stop.method


def tour_fidelity(dataset: Dataset) -> list[tuple[str, str]]:
    """(user, method) of every fidelity a Fidelity stop shows, in tour order, each once."""
    wanted: list[tuple[str, str]] = []
    for stop in _stops(dataset):
        method = fidelity_method(stop) if stop.tab == "Fidelity" else None
        if method and stop.user and (stop.user, method) not in wanted:
            wanted.append((stop.user, method))
    return wanted


EVALUATE_MODULES = ("scipy.stats",)  # imported by the Evaluate boards' statistics on first use: seconds per process


def warm_modules(dataset: Dataset) -> list[str]:
    """Import what the tour's Evaluate stops compute with, when the tour has one (a first import of scipy.stats is
    seconds on a busy machine, paid by the first view of the page otherwise)."""
    stops, _ = load_tour(dataset)
    if not any(s.page == "evaluate" for s in stops):
        return []
    for name in EVALUATE_MODULES:
        importlib.import_module(name)
    return list(EVALUATE_MODULES)


def warm_embedders(ws: Workspace, dataset: Dataset) -> list[str]:
    """Load the embedder of each language the tour's memory stops show (the workspace keeps each loaded) — unless the
    home's embedding cache already answers (a start after the first): then no model is loaded, and the stops, whose
    texts were embedded on that first start, load none either."""
    names = []
    for language in dict.fromkeys(dataset.users[s.user].language for s in _stops(dataset) if s.user in dataset.users):
        embedder = ws.embedder(None, language)
        embedder.embed_queries(["warm-up"])
        names.append(embedder.name)
    return names


def warm_fidelity(ws: Workspace, dataset: Dataset, uid: str, method: str) -> str:
    """Measure one method's fidelity against gold, and the user's reference memories, as the Fidelity tab would
    (stored reports are reused; a memory an LLM would have to build is left alone); what was done, in words."""
    dkey, user = dataset_key(dataset.root), dataset.users[uid]
    if ws.memory.find_build(dkey, uid, method) is None and get_method_class(method).uses_llm:
        return f"fidelity of {method} for {uid}: not built (an LLM build; left to the page)"
    builder = ws.open_user_builder(dkey, user, method)
    if len(builder.store.done_stages(builder.build_id)) < builder.total_stages:
        if get_method_class(method).uses_llm:
            return f"fidelity of {method} for {uid}: not fully built (an LLM build; left to the page)"
        builder.run()
    vectors = StatementVectors(builder.embedder)
    measure_build(builder, ws.fidelity, vectors=vectors)
    reference_reports(dataset, dkey, user, builder.embedder, ws.fidelity, vectors=vectors)
    return f"fidelity of {method} for {uid}: measured"


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
    queries = topic_queries(dataset.users[uid])
    builder.embedder.embed_queries(queries)  # kept in the home's embedding cache: later processes load no model
    builder.retrieve(dataset.users[uid].name, "requirement")
    return f"{method} of {uid}: indexed, {len(queries)} topic queries embedded"


def topic_queries(user: User) -> list[str]:
    """Every query the Retrieval tab offers for this user's query-session topics: each topic's user query (purpose
    ``requirement``) and its requirement (purpose ``solution``), each once."""
    return list(dict.fromkeys(text for s in user.query for t in s.topics
                              for text in (t.topic.user_query, t.topic.requirement) if text.strip()))


def warm_tour(ws: Workspace, root: Path) -> list[str]:
    """Warm what the tour of the dataset at ``root`` shows: the embedders, the Evaluate stops' libraries, every build
    a memory stop shows, every fidelity a Fidelity stop shows; each failure is logged and the rest go on."""
    done: list[str] = []
    dataset = load_dataset(root)
    steps: list[tuple[str, Callable[[], str]]] = [("embedders", lambda: "embedders loaded: " + ", ".join(
        warm_embedders(ws, dataset)))]
    steps.append(("modules", lambda: "modules imported: " + (", ".join(warm_modules(dataset)) or "none")))
    steps += [(f"{method} memory of {uid}", partial(warm_build, ws, dataset, uid, method))
              for uid, method in tour_builds(dataset) if uid in dataset.users]
    steps += [(f"{method} fidelity of {uid}", partial(warm_fidelity, ws, dataset, uid, method))
              for uid, method in tour_fidelity(dataset) if uid in dataset.users]
    began = time.perf_counter()
    for what, step in steps:
        start = time.perf_counter()
        try:
            done.append(step())
        except Exception:  # what cannot be warmed is the page's to report; the rest still warms
            log.exception("warming the tour's %s failed", what)
            continue
        log.info("tour warm-up: %s in %.1f s", done[-1], time.perf_counter() - start)
    log.info("%s: %d of %d step(s) in %.1f s", FINISHED, len(done), len(steps), time.perf_counter() - began)
    return done


def start_warm_tour(ws: Workspace, root: Path) -> threading.Thread:
    """:func:`warm_tour` on a daemon thread (the app serves meanwhile; a page opened first does the same work)."""
    thread = threading.Thread(target=warm_tour, args=(ws, root), name="pal-tour-warmup", daemon=True)
    thread.start()
    return thread


def demo_root(env: Mapping[str, str] | None = None) -> Path | None:
    """The folder of the demo workspace's bundle (``PAL_DEMO_WORKSPACE``) when it holds a ``tour.json``."""
    bundle = (os.environ if env is None else env).get(DEMO_ENV)
    if not bundle:
        return None
    path = Path(bundle) if Path(bundle).is_absolute() else PROJECT_ROOT / bundle
    return path.parent if (path.parent / "tour.json").is_file() else None


def start_demo_warmup(ws: Workspace, env: dict[str, str] | None = None) -> threading.Thread | None:
    """Warm the tour of the demo workspace (``PAL_DEMO_WORKSPACE``, beside its ``tour.json``) once per process and
    home; None when there is nothing to warm or it was started already."""
    root = demo_root(env)
    if root is None or ws.read_only:
        return None
    with _LOCK:
        if str(ws.home) in _STARTED:
            return None
        _STARTED.add(str(ws.home))
    return start_warm_tour(ws, root)


CACHE_LOGGER = "streamlit.runtime.caching.cache_data_api"  # warns at each st.cache_data decorated without a runtime
PAGE_LIBRARIES = {"memory": ("chromadb",), "evaluate": EVALUATE_MODULES}  # imported on a page's first use, not by it
EVERY_PAGE = ("streamlit.emojis",)  # imported by the first st.info/st.warning of a process (its icon lookup)


def tour_page_modules(root: Path) -> list[str]:
    """The modules the tour's pages render with: the home page's (where the tour starts) and each visited page's
    package (``ui.<page>.view``), and the libraries a page's first view imports on first use."""
    stops, _ = load_tour(load_dataset(root, lazy=True))
    pages = dict.fromkeys(["home", *(s.page for s in stops)])
    return list(dict.fromkeys([*(m for page in pages for m in (f"ui.{page}.view", *PAGE_LIBRARIES.get(page, ()))),
                               *EVERY_PAGE]))


def preload_tour_pages(root: Path) -> list[str]:
    """Import :func:`tour_page_modules` (``serve.py`` does this as the server starts, before any session: Streamlit's
    caches look their storage up when called, so a decorator run before the runtime exists loses nothing); a module
    that fails is logged and the rest go on. A tour stop opened as the server's first view then finds them imported
    (seconds of a busy machine otherwise: pandas, plotly, chromadb, the page's own modules)."""
    began, done = time.perf_counter(), []
    quiet = logging.getLogger(CACHE_LOGGER)
    level, quiet.level = quiet.level, logging.ERROR  # no runtime yet: each st.cache_data would warn (harmlessly)
    try:
        for name in tour_page_modules(root):
            try:
                importlib.import_module(name)
            except Exception:  # the page reports its own import error when opened; the rest still load
                log.exception("preloading %s for the tour failed", name)
                continue
            done.append(name)
    finally:
        quiet.level = level
    log.info("tour pages preloaded in %.1f s: %s", time.perf_counter() - began, ", ".join(done))
    return done


def preload_demo_pages(env: Mapping[str, str] | None = None) -> list[str]:
    """:func:`preload_tour_pages` of the demo workspace's tour (``PAL_DEMO_WORKSPACE``); nothing without one."""
    root = demo_root(env)
    return [] if root is None else preload_tour_pages(root)
