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

Under ``make run`` the server does this before it answers (``serve.py``, :func:`warm_demo_at_start`): it imports
the tour's pages, opens the process workspace (importing the demo bundle on the first start), computes what the
tour's stops show from stored records — the fidelity reports parsed, the fidelity leaderboard with its bootstrap
CIs and takeaway, their charts drawn once — each memoised by the revision of the records it came from
(:class:`evaluation.fidelity.store.ParsedReports`, :func:`evaluation.takeaways.fidelity_board`), and starts
:func:`warm_tour` in the background: a stop opened as the server's first view then recomputes nothing of it,
and shares no CPU with the warm-up that a first view would otherwise start beside it.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from evaluation.fidelity.compute import StatementVectors
from evaluation.fidelity.service import measure_build, reference_reports
from evaluation.takeaway_words import dataset_argument, language_of
from evaluation.takeaways import fidelity_board, primary_measurement
from memory.methods import get_method_class, is_oracle, method_availability
from palset.dataset import Dataset, User, dataset_key
from palset.loader import load_dataset
from palset.names import PROJECT_ROOT
from studio.workspace import Workspace
from ui.charts import build_estimates_figure
from ui.fidelity import FIDELITY_BASELINE, fidelity_figure, layer_series
from ui.platform_state import home_workspace
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
    a memory stop shows, every fidelity a Fidelity stop shows, then the figures computed from the stored records
    (:func:`precompute_tour`: a report measured here, as on a home's first start, is on the board before the
    leaderboards stop is opened); each failure is logged and the rest go on."""
    done: list[str] = []
    dataset = load_dataset(root)
    steps: list[tuple[str, Callable[[], str]]] = [("embedders", lambda: "embedders loaded: " + ", ".join(
        warm_embedders(ws, dataset)))]
    steps.append(("modules", lambda: "modules imported: " + (", ".join(warm_modules(dataset)) or "none")))
    steps += [(f"{method} memory of {uid}", partial(warm_build, ws, dataset, uid, method))
              for uid, method in tour_builds(dataset) if uid in dataset.users]
    steps += [(f"{method} fidelity of {uid}", partial(warm_fidelity, ws, dataset, uid, method))
              for uid, method in tour_fidelity(dataset) if uid in dataset.users]
    if any(_shows_fidelity(load_tour(dataset)[0])):  # the figures again, over what the steps above stored
        steps.append(("figures", lambda: "; ".join(precompute_tour(ws, dataset)) or "no figures precomputed"))
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


def start_demo_warmup(ws: Workspace, env: Mapping[str, str] | None = None) -> threading.Thread | None:
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
# imported by the first st.info/st.warning of a process (its icon lookup), and by the first page config (its icon)
EVERY_PAGE = ("streamlit.emojis", "PIL.Image")


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
    that fails is logged and the rest go on; then :func:`prime_first_run`. A tour stop opened as the server's first
    view then finds them imported (seconds of a busy machine otherwise: pandas, plotly, chromadb, the page's own
    modules). The modules imported."""
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
    primed = prime_first_run()
    log.info("tour pages preloaded in %.1f s: %s (and %s)", time.perf_counter() - began, ", ".join(done),
             ", ".join(primed))
    return done


def prime_first_run() -> list[str]:
    """Do once, before any session, what the first script run of a process otherwise does in front of its viewer:
    find which memory methods import in this install (every page's method pickers ask; the first ask imports each
    method's module), and map every loaded module to its source file — Streamlit's first element of a process
    walks the calling stack with :mod:`inspect` (its check for an interactive interpreter), which resolves the
    file of each of the ~2,600 loaded modules once and keeps them; a fraction of a second to seconds of a busy
    machine."""
    method_availability()
    inspect.getmodule(inspect.currentframe())  # fills inspect's module ↔ file map for every module loaded so far
    return ["memory methods", "module files"]


def _shows_fidelity(stops: list[TourStop]) -> tuple[bool, bool]:
    """(a stop shows a Fidelity tab, a stop shows the leaderboards)."""
    return (any(s.page == "memory" and s.tab == "Fidelity" for s in stops),
            any(s.page == "evaluate" and s.section == "leaderboards" for s in stops))


def precompute_tour(ws: Workspace, dataset: Dataset) -> list[str]:
    """Compute in this process what the tour's stops show from stored records, as their pages read it: every
    fidelity report of the tour's dataset parsed (a Fidelity stop reads its method's and the references'), the
    fidelity leaderboard with its CIs and takeaway (the leaderboards stop), and their charts drawn once (the
    plotting library builds its classes on first use). Each result is memoised by the revision of the records it
    came from, so a report stored later is read and computed anew, never shown stale. What was done, in words; a
    failure is logged and the rest goes on."""
    stops, problem = load_tour(dataset)
    if problem:
        log.warning("tour of %s not precomputed: %s", dataset.root, problem)
    fidelity_tab, boards = _shows_fidelity(stops)
    if not (fidelity_tab or boards):
        return []
    start = time.perf_counter()
    try:
        done = _precompute_fidelity(ws, dataset, boards)
    except Exception:  # the page computes what could not be computed here, and reports its own errors
        log.exception("precomputing the tour's fidelity figures failed")
        return []
    log.info("tour precomputed: %s in %.1f s", done, time.perf_counter() - start)
    return [done]


def _precompute_fidelity(ws: Workspace, dataset: Dataset, boards: bool) -> str:
    """The dataset's fidelity reports parsed; with ``boards``, the leaderboard and its chart as the Evaluate page
    computes them (:func:`ui.evaluate.fidelity.render_fidelity_board`); a Fidelity tab's curves drawn once."""
    reports, revision = ws.fidelity.latest_with_revision(dataset_key(dataset.root))
    said = f"{len(reports)} fidelity report(s) parsed"
    if reports:
        fidelity_figure(reports[0])  # the Fidelity tab's curves: the plotting classes it uses, built once
    if boards:
        language = language_of(dataset.language)
        rows, takeaway = fidelity_board(reports, revision, language, dataset_argument(dataset.root))
        series, layers = layer_series(rows, primary_measurement(rows), language)
        if series:
            build_estimates_figure(series, layers)
        said += f", the leaderboard of {len(rows)} row(s) with {len(takeaway.headlines)} headline(s)"
    return said


def preload_demo_pages(env: Mapping[str, str] | None = None) -> list[str]:
    """:func:`preload_tour_pages` of the demo workspace's tour (``PAL_DEMO_WORKSPACE``); nothing without one."""
    root = demo_root(env)
    return [] if root is None else preload_tour_pages(root)


def warm_demo_at_start(env: Mapping[str, str] | None = None) -> list[str]:
    """What ``serve.py`` runs before the server answers, when it serves the demo workspace (``make run``): the
    tour's pages imported (:func:`preload_tour_pages`), the process workspace opened (the demo bundle imported on
    the home's first start), the tour's figures computed from its records (:func:`precompute_tour`) and the
    tour's warm-up started in the background (:func:`start_demo_warmup`: the embedders, the memory stops'
    indexes). Nothing without a demo workspace; what was done, in words."""
    root = demo_root(env)
    if root is None:
        return []
    done = preload_tour_pages(root)
    began = time.perf_counter()
    try:
        ws = home_workspace()  # the app's own (one per process and home), as app.py opens it
    except Exception:  # the first view opens it again and shows why it cannot
        log.exception("the workspace could not be opened before the server's first view")
        return done
    done += precompute_tour(ws, load_dataset(root))
    if start_demo_warmup(ws, env) is not None:
        done.append("warm-up started")
    log.info("demo workspace opened and its tour precomputed in %.1f s, before the first view",
             time.perf_counter() - began)
    return done
