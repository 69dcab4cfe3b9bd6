"""Rendering of the Simulate page: a simulated user talks to a memory-equipped assistant, turn by turn.

Setup picks a user, a topic (or a typed opening question), the schedule and one method, or two
methods side by side on the same spec and seed. The run then proceeds in the script itself: each
utterance is drawn as it appears and the assistant's text streams token by token. A person can take
over either side; Stop ends the run cleanly and Resume continues it. Every utterance is saved by
:class:`sim.runner.Simulation` the moment it exists, so a closed browser loses nothing.

State lives in the URL (``?user=…&method=…&compare=…&tab=…&run=…``): ``?run=<run_id>`` opens a run
read-only (with its paired run, side by side). Runs this browser session drives are kept in
``st.session_state["sim_live"]``. All text from data goes through :func:`ui.text.md_escape`, a
dataframe cell or ``st.code``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pandas as pd
import streamlit as st

from backends.llm.errors import LLMError
from memory.methods import get_method_class
from memory.service import dataset_key
from palset.dataset import Dataset, User
from sim.export import run_to_json, run_to_markdown, speaker
from sim.roles import SimulationError
from sim.runner import Simulation, retry_failed
from sim.schedule import fixed_schedule
from sim.service import SimulationSetupError, make_spec, open_simulation
from sim.store import SimStore, run_id_for
from sim.types import RunRecord, RunSpec, Utterance
from ui import platform_state
from ui.memory_view import NO_COMPARE, available_methods, default_method, method_label
from ui.text import clip, md_escape
from ui.url_state import UrlState
from ui.users_view import ACT_COLOURS

TABS = ["Simulation", "Runs"]
MODES = ["fixed", "free"]
SIDES = {"user": ("Simulator", "Me"), "assistant": ("Assistant", "Me")}
AVATARS = {"simulator": ":material/person:", "assistant": ":material/smart_toy:", "human": ":material/keyboard:"}
STATUS_COLOURS = {"running": "blue", "finished": "green", "stopped": "orange", "failed": "red"}
_KEYS = {"user": "sim_user", "method": "sim_method", "compare": "sim_compare", "tab": "sim_tab"}
_URL = UrlState(_KEYS, "sim")


def live_runs() -> dict[str, Simulation]:
    """The runs this browser session drives (run id → simulation)."""
    return st.session_state.setdefault(LIVE, {})
LIVE, GO, MESSAGE = "sim_live", "sim_go", "sim_message"



# ---------------------------------------------------------------- page


def render_simulate(dataset: Dataset) -> None:
    st.title("Simulate")
    if not dataset.users:
        st.info("This dataset has no users. Pick another dataset in the sidebar.")
        return
    _URL.sync("tab", TABS, TABS[0])
    tabs = st.tabs(TABS, key=_KEYS["tab"], on_change="rerun")
    _URL.write("tab")
    for tab, renderer in zip(tabs, (render_simulation_tab, render_runs)):
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


# ---------------------------------------------------------------- setup


def topic_options(user: User) -> dict[str, str]:
    """``"{sample_id}/{topic_key}"`` → label, for every topic of the user's sessions, query sessions first."""
    sessions = user.query + [s for s in user.sessions if s.split != "query"]
    return {f"{s.sample_id}/{t.key}": f"{s.sample_id} · {t.key} · {clip(t.topic.user_query, 120)}"
            for s in sessions for t in s.topics}


def pair_id_for(specs: list[RunSpec]) -> str:
    """The same pair id for the same compared specs, so a resumed comparison stays paired."""
    shared = specs[0].model_dump(exclude={"method"})
    raw = json.dumps({**shared, "methods": sorted(s.method for s in specs)}, sort_keys=True)
    return f"pair-{hashlib.sha1(raw.encode()).hexdigest()[:10]}"


def render_setup(dataset: Dataset) -> None:
    """Who and what to simulate, with which method(s); Start (or Resume when these runs exist)."""
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
    method, compare = _method_widgets(methods)
    seed = st.text_input("Seed", value="0", key="sim_seed",
                         help="The same settings and seed resume the same run; change the seed for a new run.").strip()
    sample_id, topic_key = topic.split("/", 1)
    specs = [make_spec(dataset, uid, sample_id, topic_key, m, mode=mode, seed=seed or "0", max_turns=max_turns,
                       free_query=free_query.strip() or None) for m in [method] + ([compare] if compare != NO_COMPARE else [])]
    _start_button(dataset, specs)


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
    _URL.sync("method", methods, default_method(methods))
    with c1:
        method = st.selectbox("Method", methods, key=_KEYS["method"], format_func=method_label)
    _URL.write("method")
    others = [NO_COMPARE, *(m for m in methods if m != method)]
    _URL.sync("compare", others, NO_COMPARE)
    with c2:
        compare = st.selectbox("Compare with", others, key=_KEYS["compare"],
                               format_func=lambda m: m if m == NO_COMPARE else method_label(m))
    _URL.write("compare")
    building = [m for m in (method, compare) if m != NO_COMPARE and get_method_class(m).uses_llm]
    if building:
        st.caption(f"{', '.join(building)} build memory with the LLM: the first assistant turn builds whatever is "
                   "missing (watch it on the Memory page by building there first).")
    return method, compare


def _start_button(dataset: Dataset, specs: list[RunSpec]) -> None:
    store = SimStore()
    stored = [_stored_status(store, run_id_for(s)) for s in specs]
    existing = [s for s in stored if s is not None]
    if existing:
        st.caption(f"Runs with these settings exist ({', '.join(existing)}): Resume continues them. "
                   "Change the seed for a new run.")
    label = "Resume" if existing else "Start"
    if st.button(label, key="sim_start", type="primary", icon=":material/play_arrow:"):
        sims = _open(dataset, [(s, pair_id_for(specs) if len(specs) == 2 else None) for s in specs])
        if sims:
            go_live(sims)
            st.query_params["run"] = sims[0].record.run_id
            st.rerun()


def _stored_status(store: SimStore, run_id: str) -> str | None:
    try:
        return store.load(run_id).status
    except KeyError:
        return None


def _open(dataset: Dataset, specs: list[tuple[RunSpec, str | None]]) -> list[Simulation] | None:
    """Open (create or resume) each run; a setup or configuration problem is a message, never a traceback."""
    try:
        llm = platform_state.llm_client()
        return [open_simulation(dataset, spec, llm, pair_id=pair) for spec, pair in specs]
    except Exception as e:  # noqa: BLE001 - SimulationSetupError, ConfigError, embedder or store problems alike
        st.error(f"Cannot open the simulation: {md_escape(error_text(e))}")
        return None


def error_text(e: Exception) -> str:
    if isinstance(e, (LLMError, SimulationError, SimulationSetupError)):
        return str(e)
    return f"{type(e).__name__}: {e}"


def resume(sim: Simulation) -> None:
    """A stopped or failed run continues from its next missing utterance."""
    if sim.record.status == "failed":
        retry_failed(sim)
    elif sim.record.status == "stopped":
        sim.record.status = "running"
        sim.store.set_status(sim.record.run_id, "running")


def go_live(sims: list[Simulation]) -> None:
    """This browser session drives these runs from now on, and they advance."""
    live = live_runs()
    for sim in sims:
        resume(sim)
        live[sim.record.run_id] = sim
    st.session_state[GO] = True


# ---------------------------------------------------------------- one run (or a pair): replay or live


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
        live_runs().pop(run_id, None)
    st.session_state[GO] = False
    st.query_params.pop("run", None)


def render_run(dataset: Dataset, run_id: str) -> None:
    store = SimStore()
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
    else:
        render_replay(dataset, [store.load(i) for i in ids])


def _columns(n: int) -> list:
    return st.columns(n, gap="medium") if n > 1 else [st.container()]


def run_header(record: RunRecord) -> None:
    """Method, status and what is simulated; the error of a failed run."""
    spec = record.spec
    colour = STATUS_COLOURS.get(record.status, "gray")
    st.markdown(f"#### {md_escape(method_label(spec.method))}  \n:{colour}-badge[{record.status}] "
                f":gray[{md_escape(record.run_id)} · user {md_escape(spec.user_id)} · {md_escape(spec.sample_id)} · "
                f"{md_escape(spec.topic_key)} · {spec.mode} · seed {md_escape(spec.seed)}]")
    if spec.free_query:
        st.caption(f"Typed opening question: {md_escape(spec.free_query)}")
    if record.status == "failed":
        st.error(f"The run stopped on an error: {md_escape(record.error or 'unknown')}. "
                 "Every saved turn is kept; press Resume to continue.")


def render_replay(dataset: Dataset, records: list[RunRecord]) -> None:
    """A stored run (and its pair) read-only, with Resume when it is unfinished."""
    unfinished = [r for r in records if r.status != "finished"]
    if unfinished:
        same = all(r.spec.dataset == dataset_key(dataset.root) for r in records)
        if not same:
            st.caption("This run belongs to another dataset; open that dataset in the sidebar to resume it.")
        if st.button("Resume", key="sim_resume_replay", type="primary", icon=":material/play_arrow:", disabled=not same):
            sims = _open(dataset, [(r.spec, r.pair_id) for r in records])
            if sims:
                go_live(sims)
                st.rerun()
    for col, record in zip(_columns(len(records)), records):
        with col:
            run_header(record)
            for utt in record.utterances:
                render_utterance(utt, record.run_id)
            export_buttons(record)


def export_buttons(record: RunRecord) -> None:
    c1, c2 = st.columns(2)
    c1.download_button("Export JSON", run_to_json(record), file_name=f"{record.run_id}.json", mime="application/json",
                       icon=":material/download:", key=f"sim_json_{record.run_id}", on_click="ignore")
    c2.download_button("Export Markdown", run_to_markdown(record), file_name=f"{record.run_id}.md",
                       mime="text/markdown", icon=":material/download:", key=f"sim_md_{record.run_id}",
                       on_click="ignore")


# ---------------------------------------------------------------- utterances


def chat_for(side: str, actor: str):
    """A chat message with a name and avatar that tell the simulator, a person and the assistant apart."""
    return st.chat_message(speaker(side, actor), avatar=AVATARS[actor])


def badge_line(utt_act: str, turn_no: int, extra: str = "") -> str:
    colour = ACT_COLOURS.get(utt_act, "gray")
    return f":{colour}-badge[{md_escape(utt_act)}] :gray[turn {turn_no}{extra}]"


def render_utterance(utt: Utterance, run_id: str) -> None:
    with chat_for(utt.side, utt.actor):
        utterance_body(utt, run_id)


def utterance_body(utt: Utterance, run_id: str) -> None:
    """Act badge, text, and for the assistant what memory gave it and the exact prompt."""
    extra = f" · {utt.attempts} tries" if utt.attempts > 1 else ""
    st.markdown(f"{badge_line(utt.act.value, utt.turn_no, extra)}  \n{md_escape(utt.content)}")
    if utt.actor == "assistant":
        with st.expander("Memory and prompt"):
            memory_and_prompt(utt, f"{run_id}_{utt.turn_no}")
    elif utt.actor == "simulator" and utt.prompt:
        with st.expander("Prompt"):
            st.code(utt.prompt, language=None, wrap_lines=True)


def memory_and_prompt(utt: Utterance, key: str) -> None:
    if utt.retrieval_query:
        st.markdown(f"**Retrieval query:** {md_escape(utt.retrieval_query)}")
    else:
        st.caption("No retrieval query: this method does not search its memory by query.")
    trace = utt.trace
    if trace is None:
        st.caption("No memory: this assistant sees only the dialogue so far.")
    else:
        tokens, full = trace.get("tokens", 0), trace.get("full_history_tokens", 0)
        share = f" ({tokens / full:.1%})" if full else ""
        st.caption(f"Memory context: {tokens:,} tokens · full history: {full:,} tokens{share} · "
                   f"purpose {md_escape(trace.get('purpose', '?'))}")
        items = trace.get("items", [])
        if items:
            st.dataframe(pd.DataFrame([{"layer": i["layer"], "score": i["score"], "text": i["text"]} for i in items]),
                         hide_index=True, width="stretch", key=f"sim_items_{key}",
                         column_config={"text": st.column_config.TextColumn("text", width="large")})
        else:
            st.caption("No items retrieved.")
    st.markdown("**Prompt**")
    st.code(utt.prompt or "(not recorded)", language=None, wrap_lines=True, height=260)


# ---------------------------------------------------------------- live: controls, stepping, takeover


def held_sides(run_id: str) -> set[str]:
    """The sides a person holds in this run (set by the takeover controls)."""
    return {side for side in SIDES if st.session_state.get(f"sim_hold_{side}_{run_id}") == "Me"}


def waiting_for_person(sim: Simulation) -> tuple[str, str] | None:
    """(side, act) when the run is paused at a side a person holds."""
    slot = sim.next_slot() if sim.record.status == "running" else None
    if slot and slot[1] in held_sides(sim.record.run_id):
        return slot[1], slot[2].value
    return None


def can_advance(sim: Simulation) -> bool:
    return sim.record.status == "running" and waiting_for_person(sim) is None


def _stop(sims: list[Simulation]) -> None:
    for sim in sims:
        if sim.record.status == "running":
            sim.stop()
    st.session_state[GO] = False


def _resume(sims: list[Simulation]) -> None:
    for sim in sims:
        resume(sim)
    st.session_state[GO] = True


def _continue() -> None:
    st.session_state[GO] = True


def _submit_person(run_id: str) -> None:
    """Chat input callback: the person's words become the next utterance, then the run goes on."""
    sim = live_runs().get(run_id)
    text = st.session_state.get(f"sim_say_{run_id}")
    if sim is None or not isinstance(text, str):
        return
    try:
        sim.step(human_text=text)
    except SimulationError as e:
        st.session_state[MESSAGE] = str(e)
        return
    st.session_state[GO] = True


def live_controls(sims: list[Simulation]) -> None:
    """Stop, Resume or Continue, as the runs' state allows; a rejected typed message."""
    if message := st.session_state.pop(MESSAGE, None):
        st.warning(md_escape(message))
    if all(s.record.status == "finished" for s in sims):
        return
    running = any(s.record.status == "running" for s in sims)
    c1, c2, _ = st.columns([1, 1, 4])
    c1.button("Stop", key="sim_stop", icon=":material/stop:", disabled=not running, on_click=_stop, args=(sims,),
              help="Ends the run cleanly: every saved turn stays, and Resume continues it.")
    if any(s.record.status in ("stopped", "failed") for s in sims):
        c2.button("Resume", key="sim_resume", icon=":material/play_arrow:", type="primary", on_click=_resume,
                  args=(sims,))
    elif not st.session_state.get(GO) and any(can_advance(s) for s in sims):
        c2.button("Continue", key="sim_continue", icon=":material/play_arrow:", type="primary", on_click=_continue)


def takeover_controls(run_id: str) -> None:
    c1, c2 = st.columns(2)
    for col, (side, options) in zip((c1, c2), SIDES.items()):
        key = f"sim_hold_{side}_{run_id}"
        st.session_state.setdefault(key, options[0])
        col.segmented_control(f"{side.capitalize()} side", options, required=True, key=key,
                              help="Me: the run pauses at this side's turns and you type them. Switch back, then "
                                   "Continue, to hand the side back.")


def render_live(sims: list[Simulation]) -> None:
    """The runs this session drives: controls, transcripts, then advance them step by step while allowed."""
    live_controls(sims)
    bodies, feet = [], []
    for col, sim in zip(_columns(len(sims)), sims):
        with col:
            run_header(sim.record)
            if sim.record.status != "finished":
                takeover_controls(sim.record.run_id)
            body = st.container()
            for utt in sim.record.utterances:
                with body:
                    render_utterance(utt, sim.record.run_id)
            bodies.append(body)
            feet.append(st.container())
    if st.session_state.get(GO) and advance(sims, bodies):
        st.session_state[GO] = False
        st.rerun()
    st.session_state[GO] = False
    for sim, foot in zip(sims, feet):
        with foot:
            render_foot(sim)


def render_foot(sim: Simulation) -> None:
    """The person's input when the run waits for them; the exports."""
    waiting = waiting_for_person(sim)
    if waiting:
        side, act = waiting
        st.caption(f"Your turn as the {side}: {act}.")
        st.chat_input(f"Your {side} turn ({act})", key=f"sim_say_{sim.record.run_id}", on_submit=_submit_person,
                      args=(sim.record.run_id,))
    export_buttons(sim.record)


def advance(sims: list[Simulation], bodies: list) -> bool:
    """Step every run that may go on, one utterance each in turn, until none can; True when anything happened."""
    progressed = False
    while True:
        moved = False
        for sim, body in zip(sims, bodies):
            if can_advance(sim):
                with body:
                    step_once(sim)
                moved = True
        if not moved:
            return progressed
        progressed = True


def step_once(sim: Simulation) -> None:
    """One utterance, drawn as it appears (the assistant's streams); an error fails the run with a message."""
    slot = sim.next_slot()
    if slot is None:
        sim.step()  # nothing left: marks the run finished
        return
    turn, side, act = slot
    actor = "simulator" if side == "user" else "assistant"
    with chat_for(side, actor):
        placeholder = st.empty()
        placeholder.caption(f"{speaker(side, actor)} is writing… ({act.value})")
        try:
            utt = sim.step(on_token=stream_into(placeholder, badge_line(act.value, turn)))
        except Exception as e:  # noqa: BLE001 - LLMError, SimulationError, memory problems: a message, never a traceback
            fail(sim, e)
            placeholder.error(f"{md_escape(error_text(e))}. Every saved turn is kept; press Resume to continue.")
            return
        if utt is not None:
            with placeholder.container():
                utterance_body(utt, sim.record.run_id)


def stream_into(placeholder, header: str) -> Callable[[str], None]:
    """An ``on_token`` callback that redraws the growing text in ``placeholder``."""
    parts: list[str] = []

    def on_token(token: str) -> None:
        parts.append(token)
        placeholder.markdown(f"{header}  \n{md_escape(''.join(parts))} ▌")

    return on_token


def fail(sim: Simulation, e: Exception) -> None:
    """Mark the run failed (saved on the run) so Resume can retry it."""
    sim.record.status, sim.record.error = "failed", error_text(e)
    sim.store.set_status(sim.record.run_id, "failed", sim.record.error)


# ---------------------------------------------------------------- runs list


def runs_frame(rows: list[dict]) -> pd.DataFrame:
    columns = ["run_id", "user_id", "sample_id", "topic_key", "method", "mode", "seed", "status", "turns",
               "utterances", "updated"]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame["turns"] = (frame["utterances"] + 1) // 2
    frame["updated"] = pd.to_datetime(frame["updated_at"], unit="s")
    return frame[columns]


def _open_selected_run(ids: list[str]) -> None:
    """Runs table callback: a selected row opens that run (read-only, or live if this session drives it)."""
    rows = (st.session_state.get("sim_runs_table") or {}).get("selection", {}).get("rows", [])
    if rows and rows[0] < len(ids):
        st.query_params["run"] = ids[rows[0]]
        st.session_state[_KEYS["tab"]] = TABS[0]


def render_runs(dataset: Dataset) -> None:
    """Every stored run of this dataset, newest first; select one to replay or resume it."""
    rows = SimStore().list(dataset=dataset_key(dataset.root))
    if not rows:
        st.info("No simulation runs for this dataset yet: start one on the Simulation tab.")
        return
    frame = runs_frame(rows)
    ids = list(frame["run_id"])
    st.caption(f"{len(rows)} run(s). Select a row to open it; unfinished runs can be resumed from there.")
    st.dataframe(frame, hide_index=True, width="stretch", key="sim_runs_table", selection_mode="single-row",
                 on_select=lambda: _open_selected_run(ids),
                 column_config={"updated": st.column_config.DatetimeColumn("updated", format="YYYY-MM-DD HH:mm")})
