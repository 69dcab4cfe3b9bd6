"""Rendering of the Simulate page: a simulated user talks to a memory-equipped assistant, turn by turn.

Setup picks a user, a topic (or a typed opening question), the schedule and one method, or two
methods side by side on the same spec and seed. Start hands the run to the app's job engine
(:mod:`ui.simulate.jobs`): it goes on with the tab closed, the page draws each utterance as it is stored, and a
page opened later watches it. A person can take over either side (before Start, or with Take over): the
run is then driven by this browser session (:mod:`ui.simulate.live`), the assistant streaming token by token.
Stop ends the run cleanly and Resume continues it. Every utterance is saved by
:class:`sim.runner.Simulation` the moment it exists, so a closed browser loses nothing.

State lives in the URL (``?user=…&method=…&compare=…&tab=…&run=…``): ``?run=<run_id>`` opens a run
read-only (with its paired run, side by side). Runs this browser session drives are kept in
``st.session_state["sim_live"]``. All text from data goes through :func:`ui.text.md_escape`, a
dataframe cell or ``st.code``.
"""

from __future__ import annotations

import hashlib
import json
import logging

import streamlit as st
from pydantic import ValidationError

from backends.config import ConfigError
from memory.methods import ORACLE_LABEL, get_method_class
from palset.dataset import Dataset, User, dataset_key
from sim.runner import Simulation
from sim.schedule import fixed_schedule
from sim.service import make_spec
from sim.store import SimStore, run_id_for
from sim.types import SIMULATOR_VARIANTS, RunRecord, RunSpec, SimulatorKind, parse_variant
from ui import platform_state
from ui.methods import NO_COMPARE, available_methods, default_simulation_method, method_label
from ui.platform_state import base_workspace, platform_config
from ui.presenting import read_only_note, writes_allowed
from ui.records_model import render_records_model
from ui.simulate import jobs as sim_jobs
from ui.simulate.checks import render_run_checks, stored_checks
from ui.simulate.live import GO, MESSAGE, go_live, held_sides, live_runs, render_live, tab_driver
from ui.simulate.runs import render_runs
from ui.simulate.transcript import columns_for, export_buttons, render_utterance, run_header
from ui.text import clip, error_text, md_escape
from ui.trace import render_trace_link
from ui.url_state import UrlState

log = logging.getLogger(__name__)
SIM_ROLES = ("user_simulator", "assistant")
TABS = ["Simulation", "Runs"]
MODES = ["fixed", "free"]
_KEYS = {"user": "sim_user", "method": "sim_method", "compare": "sim_compare", "tab": "sim_tab",
         "simulator": "sim_simulator"}
SIMULATOR_LABELS = {"llm": "User-LLM", "llm+style": "User-LLM + the user's earlier turns (profile and style)",
                    "replay": "The dataset's own dialogue, replayed (reference: ceiling)",
                    "always-accept": "Always accepts (reference: floor)",
                    "random-verdict": "Random verdicts (reference: floor)"}
_URL = UrlState(_KEYS, "sim")


def render_simulate(dataset: Dataset) -> None:
    st.title("Simulate")
    if not dataset.users:
        st.info("This dataset has no users. Pick another dataset in the sidebar.")
        return
    _URL.sync("tab", TABS, TABS[0])
    tabs = st.tabs(TABS, key=_KEYS["tab"], on_change="rerun")
    _URL.write("tab")
    for tab, renderer in zip(tabs, (render_simulation_tab, lambda d: render_runs(d, _KEYS["tab"], TABS[0]))):
        if tab.open is False:
            continue
        with tab:
            renderer(dataset)


def render_simulation_tab(dataset: Dataset) -> None:
    run_id = st.query_params.get("run")
    if run_id:
        render_run(dataset, run_id)
    else:
        render_setup(dataset)


def topic_options(user: User) -> dict[str, str]:
    """``"{sample_id}/{topic_key}"`` → label, for every topic of the user's sessions, query sessions first."""
    sessions = user.query + [s for s in user.sessions if s.split != "query"]
    return {f"{s.sample_id}/{t.key}": f"{s.sample_id} · {t.key} · {clip(t.topic.user_query, 120)}"
            for s in sessions for t in s.topics}


def pair_id_for(specs: list[RunSpec]) -> str:
    """The same pair id for the same compared specs, so a resumed comparison stays paired."""
    shared = {k: v for k, v in specs[0].identity().items() if k != "method"}
    raw = json.dumps({**shared, "methods": sorted(s.method for s in specs)}, sort_keys=True)
    return f"pair-{hashlib.sha1(raw.encode()).hexdigest()[:10]}"


def _records_model_notice() -> None:
    """Which model made the stored runs, when it is not this session's (offered for this session)."""
    try:
        cfg = platform_config()
    except ConfigError as e:  # the sidebar shows the error; the setup still opens
        log.info("no model notice: the configuration is broken: %s", e)
        return
    render_records_model(base_workspace().runs.models_used(), cfg, SIM_ROLES, "sim", may_change=writes_allowed())


def render_setup(dataset: Dataset) -> None:
    """Who and what to simulate, with which method(s); Start (or Resume when these runs exist)."""
    if not writes_allowed():
        st.info("Presenting (read-only): no new simulation is started here. Open one of the bundle's runs from the "
                "**Runs** tab.", icon=":material/slideshow:")
        return
    _records_model_notice()
    uids = list(dataset.users)
    methods = available_methods()
    c1, c2 = st.columns([2, 3])
    _URL.sync("user", uids, uids[0])
    with c1:
        uid = st.selectbox("User", uids, key=_KEYS["user"],
                           format_func=lambda u: f"{dataset.users[u].name} ({u} · {dataset.users[u].language})")
    _URL.write("user")
    user = dataset.users[uid]
    topics = topic_options(user)
    if not topics:
        st.info("This user has no session topics in this dataset (partial release): there is nothing to simulate.")
        return
    with c2:
        topic = st.selectbox("Topic", list(topics), key=f"sim_topic_{uid}", format_func=topics.get)
    free_query = st.text_input("Own opening question (optional)", key="sim_free_query",
                               help="The simulated user opens with this instead of the topic's query; the session's "
                                    "situation, needs and preferences still apply.")
    mode, max_turns = _schedule_widgets(dataset, topic)
    simulator, user_style = _simulator_widget()
    method, compare = _method_widgets(methods)
    seed = st.text_input("Seed", value="0", key="sim_seed",
                         help="The same settings and seed resume the same run; change the seed for a new run.").strip()
    sample_id, topic_key = topic.split("/", 1)
    try:
        specs = [make_spec(dataset, uid, sample_id, topic_key, m, mode=mode, seed=seed or "0", max_turns=max_turns,
                           free_query=free_query.strip() or None, simulator=simulator, user_style=user_style)
                 for m in [method] + ([compare] if compare != NO_COMPARE else [])]
    except ValidationError as e:  # a simulator that cannot play this setup (replay in free mode)
        log.info("simulation setup rejected: %s", e)
        st.warning(md_escape(str(e.errors()[0]["msg"]).removeprefix("Value error, ")) + ".")
        return
    _start_button(dataset, specs)


def _simulator_widget() -> tuple[SimulatorKind, bool]:
    """Who plays the user (URL ``?simulator=``): the User-LLM, with or without the style option, or a reference."""
    _URL.sync("simulator", list(SIMULATOR_VARIANTS), "llm")
    variant = st.selectbox("Simulated user", list(SIMULATOR_VARIANTS), key=_KEYS["simulator"],
                           format_func=SIMULATOR_LABELS.get,
                           help="Reference simulators give every simulator-fidelity figure its scale: the dataset's "
                                "own dialogue (replayed; fixed schedule only) and two floors that call no model.")
    _URL.write("simulator")
    return parse_variant(variant)


def _schedule_widgets(dataset: Dataset, topic: str) -> tuple[str, int]:
    c1, c2 = st.columns([1, 3])
    with c1:
        mode = st.segmented_control("Schedule", MODES, default="fixed", required=True, key="sim_mode")
    with c2:
        if mode == "free":
            max_turns = int(st.number_input("Max turns", 1, 40, 10, key="sim_max_turns"))
            st.caption("Free mode: the user side may end the dialogue; the assistant's act follows the user's.")
            return mode, max_turns
        schedule, source = fixed_schedule(dataset, topic.replace("/", "_"))
        st.caption(f"Fixed schedule: {len(schedule)} turns ({md_escape(source)}).")
    return mode, 10


def _method_widgets(methods: list[str]) -> tuple[str, str]:
    c1, c2 = st.columns(2)
    _URL.sync("method", methods, default_simulation_method(methods))
    with c1:
        method = st.selectbox("Method", methods, key=_KEYS["method"], format_func=method_label)
    _URL.write("method")
    others = [NO_COMPARE, *(m for m in methods if m != method)]
    _URL.sync("compare", others, NO_COMPARE)
    with c2:
        compare = st.selectbox("Compare with", others, key=_KEYS["compare"],
                               format_func=lambda m: m if m == NO_COMPARE else method_label(m))
    _URL.write("compare")
    oracles = [m for m in (method, compare) if m != NO_COMPARE and get_method_class(m).oracle]
    if oracles:
        st.caption(f"{', '.join(oracles)}: an {ORACLE_LABEL}. Its memory comes from the dataset's own annotations (gold "
                   "situations, requirements, preferences), so its assistant shows the ceiling, not a contender.")
    building = [m for m in (method, compare) if m != NO_COMPARE and get_method_class(m).uses_llm]
    if building:
        st.caption(f"{', '.join(building)} build memory with the LLM: the first assistant turn builds whatever is "
                   "missing (watch it on the Memory page by building there first).")
    return method, compare


def _start_button(dataset: Dataset, specs: list[RunSpec]) -> None:
    store = base_workspace().sims
    stored = [_stored_status(store, run_id_for(s)) for s in specs]
    existing = [s for s in stored if s is not None]
    if existing:
        st.caption(f"Runs with these settings exist ({md_escape(', '.join(existing))}): Resume continues them. "
                   "Change the seed for a new run.")
    label = "Resume" if existing else "Start"
    if st.button(label, key="sim_start", type="primary", icon=":material/play_arrow:"):
        pairs = [(s, pair_id_for(specs) if len(specs) == 2 else None) for s in specs]
        if any(held_sides(run_id_for(s)) for s in specs):  # a person takes a side: this session drives the run
            sims = _open(dataset, pairs)
            if not sims:
                return
            go_live(sims)  # or, when another driver holds a run, it is followed read-only
        elif not _submit(dataset, pairs):
            return
        st.query_params["run"] = run_id_for(specs[0])
        st.rerun()


def _stored_status(store: SimStore, run_id: str) -> str | None:
    try:
        return store.load(run_id).status
    except KeyError:
        return None


def _submit(dataset: Dataset, specs: list[tuple[RunSpec, str | None]]) -> bool:
    """Hand the runs to the app's job engine; a configuration problem is a message."""
    try:
        sim_jobs.start(dataset, specs)
    except Exception as e:  # ConfigError, store problems alike
        log.exception("cannot start the simulation")
        st.error(f"Cannot start the simulation: {md_escape(error_text(e))}")
        return False
    return True


def _open(dataset: Dataset, specs: list[tuple[RunSpec, str | None]]) -> list[Simulation] | None:
    """Open (create or resume) each run; a setup or configuration problem is a message, never a traceback."""
    try:
        llm = platform_state.llm_client()
        ws = platform_state.workspace()
        return [ws.open_simulation(dataset, spec, llm, pair_id=pair) for spec, pair in specs]
    except Exception as e:  # SimulationSetupError, ConfigError, embedder or store problems alike
        log.exception("cannot open the simulation")
        st.error(f"Cannot open the simulation: {md_escape(error_text(e))}")
        return None


def paired_ids(store: SimStore, record: RunRecord) -> list[str]:
    """This run, then the run compared with it (same pair id), if any."""
    if not record.pair_id:
        return [record.run_id]
    spec = record.spec
    for row in store.list(user_id=spec.user_id, sample_id=spec.sample_id, topic_key=spec.topic_key):
        if row["run_id"] != record.run_id and store.load(row["run_id"]).pair_id == record.pair_id:
            return [record.run_id, row["run_id"]]
    return [record.run_id]


def close_run(ids: list[str]) -> None:
    """Back to the setup: these runs stop advancing here (what is saved stays; the runs list resumes them)."""
    for run_id in ids:
        sim = live_runs().pop(run_id, None)
        if sim is not None:
            sim.release()
        st.session_state.get(sim_jobs.JOBS, {}).pop(run_id, None)
    st.session_state[GO] = False
    st.query_params.pop("run", None)


def render_run(dataset: Dataset, run_id: str) -> None:
    store = base_workspace().sims
    try:
        record = store.load(run_id)
    except KeyError:
        st.warning(f"No simulation run {md_escape(run_id)} in this PAL home.")
        if st.button("New simulation", key="sim_back", icon=":material/arrow_back:", type="tertiary"):
            close_run([run_id])
            st.rerun()
        return
    ids = paired_ids(store, record)
    if st.button("New simulation", key="sim_back", icon=":material/arrow_back:", type="tertiary"):
        close_run(ids)
        st.rerun()
    live = live_runs()
    if all(i in live for i in ids):
        render_live([live[i] for i in ids])
        return
    job = sim_jobs.job_for(ids)
    records = [store.load(i) for i in ids]
    # a finished job whose runs another driver holds (its unit found them driven elsewhere): follow that driver
    driven_elsewhere = job is not None and job.finished and any(store.driver(i) is not None for i in ids)
    if job is not None and not driven_elsewhere and (not job.finished
                                                     or ids[0] in st.session_state.get(sim_jobs.JOBS, {})):
        sim_jobs.render_job_run(dataset, ids, job, lambda: _take_over(dataset, records))
    else:
        render_replay(dataset, records)


def _take_over(dataset: Dataset, records: list[RunRecord]) -> None:
    """The runs continue in this session's interactive mode (paused: take a side, then Continue)."""
    sims = _open(dataset, [(r.spec, r.pair_id) for r in records])
    if sims:
        go_live(sims)
        st.session_state[GO] = False
        for run_id in (r.run_id for r in records):
            st.session_state.get(sim_jobs.JOBS, {}).pop(run_id, None)


def render_replay(dataset: Dataset, records: list[RunRecord]) -> None:
    """A stored run (and its pair) read-only, with Resume when it is unfinished; a run another driver advances
    is followed (redrawn every two seconds) with no Resume."""
    store = base_workspace().sims
    if message := st.session_state.pop(MESSAGE, None):
        st.info(md_escape(message))
    elsewhere = [lease.holder for r in records
                 if (lease := store.driver(r.run_id)) is not None and lease.holder != tab_driver()]
    if elsewhere:
        follow_elsewhere([r.run_id for r in records])
        return
    unfinished = [r for r in records if r.status != "finished"]
    if unfinished and not writes_allowed():
        read_only_note("unfinished runs are shown as they were saved, not resumed")
    elif unfinished:
        same = all(r.spec.dataset == dataset_key(dataset.root) for r in records)
        if not same:
            st.caption("This run belongs to another dataset; open that dataset in the sidebar to resume it.")
        if st.button("Resume", key="sim_resume_replay", type="primary", icon=":material/play_arrow:", disabled=not same):
            if _submit(dataset, [(r.spec, r.pair_id) for r in records]):
                st.rerun()
    transcripts(records, dataset=dataset)


def transcripts(records: list[RunRecord], exports: bool = True, dataset: Dataset | None = None) -> None:
    """The runs side by side; with ``dataset`` (a run not followed live) also its simulator checks."""
    for col, record in zip(columns_for(len(records)), records):
        with col:
            run_header(record)
            render_trace_link(record.run_id)
            result = stored_checks(record.run_id) if dataset is not None else None
            if dataset is not None:
                render_run_checks(record, dataset, result)
            for utt in record.utterances:
                turn = result.turn(utt.turn_no) if result is not None and utt.side == "user" else None
                render_utterance(utt, record.run_id, turn)
            if exports:
                export_buttons(record)


@st.fragment(run_every=2.0)
def follow_elsewhere(run_ids: list[str]) -> None:
    """A run driven elsewhere, read-only and kept current; Resume appears here once that driver lets go."""
    store = base_workspace().sims
    records = [store.load(i) for i in run_ids]
    if any((lease := store.driver(i)) is not None and lease.holder != tab_driver() for i in run_ids):
        st.info("Running elsewhere (another tab or `pal simulate`): following it read-only.",
                icon=":material/visibility:")
    elif any(r.status != "finished" for r in records):
        st.caption("The other driver stopped; reload the page to resume the run here.")
    transcripts(records, exports=False)
