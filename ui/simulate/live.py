"""Runs this browser session drives on the Simulate page: stepping (both sides stream token by token: the assistant,
and the User-LLM in fixed mode, where its turn is plain text; a free-mode user turn is one structured answer),
Stop/Resume, and a person taking over either side.

Every utterance is saved by :class:`sim.runner.Simulation` the moment it exists, so a closed browser
loses nothing; the runs driven here are kept in ``st.session_state["sim_live"]``. This tab drives a
run only while it holds the run's lease: a run driven elsewhere (another tab, ``pal simulate``) is
followed read-only instead (see :func:`ui.simulate.view.render_replay`).
"""

from __future__ import annotations

import logging

import streamlit as st

from sim.export import speaker
from sim.runner import RunElsewhere, Simulation
from sim.simulator import SimulationError
from ui.simulate.transcript import (
    SIDES,
    badge_line,
    chat_for,
    columns_for,
    export_buttons,
    render_utterance,
    run_header,
    utterance_body,
)
from ui.text import error_text, md_escape

LIVE, GO, MESSAGE = "sim_live", "sim_go", "sim_message"

log = logging.getLogger(__name__)


def live_runs() -> dict[str, Simulation]:
    """The runs this browser session drives (run id → simulation)."""
    return st.session_state.setdefault(LIVE, {})



def tab_driver() -> str:
    """This browser session's name as a run's driver."""
    from ui.platform_state import session_id

    return f"tab:{session_id()}"


def go_live(sims: list[Simulation]) -> bool:
    """This browser session drives these runs from now on, and they advance; False (and nothing driven here)
    when another driver holds any of them."""
    driver = tab_driver()
    taken = [s for s in sims if s.store.take_lease(s.record.run_id, driver)]
    if len(taken) < len(sims):
        for sim in taken:
            sim.store.release_lease(sim.record.run_id, driver)
        st.session_state[MESSAGE] = "This run is running elsewhere (another tab or `pal simulate`): following it read-only."
        return False
    live = live_runs()
    for sim in sims:
        sim.driver = driver
        sim.resume()
        live[sim.record.run_id] = sim
    st.session_state[GO] = True
    return True


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
        sim.resume()
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
        log.info("typed message rejected in %s: %s", run_id, e)
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
    for col, sim in zip(columns_for(len(sims)), sims):
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
    """One utterance, drawn as it appears (streamed: either side's text grows in place; a User-LLM turn that does not
    speak as the user is asked again, and the kept one replaces it); an error fails the run with a message."""
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
            stream = TurnStream(placeholder, badge_line(act.value, turn))
            utt = sim.step(on_token=stream.reply, on_query=stream.query)
        except RunElsewhere as e:  # another driver took the run over (our lease had lapsed): follow it
            live_runs().pop(sim.record.run_id, None)
            placeholder.info(md_escape(e))
            return
        except Exception as e:  # LLMError, SimulationError, memory problems: a message, never a traceback
            log.exception("simulation %s: turn %s %s failed", sim.record.run_id, turn, side)
            sim.fail(error_text(e))
            placeholder.error(f"{md_escape(error_text(e))}. Every saved turn is kept; press Resume to continue.")
            return
        if utt is not None:
            with placeholder.container():
                utterance_body(utt, sim.record.run_id)


class TurnStream:
    """What a turn shows while it is written, redrawn in ``placeholder``: a retrieval assistant's memory-search query
    first, as it streams (so the turn visibly starts before the memory it finds is read), then the reply growing in
    place."""

    def __init__(self, placeholder, header: str):
        self.placeholder, self.header = placeholder, header
        self.searched = ""  # the memory-search query so far; its last value is the one retrieval used
        self.replied: list[str] = []

    def query(self, so_far: str) -> None:
        self.searched = so_far
        self._draw()

    def reply(self, token: str) -> None:
        self.replied.append(token)
        self._draw()

    def text(self) -> str:
        """The markdown drawn now."""
        lines = [self.header]
        if self.searched:
            lines.append(f":material/search: *searching memory for:* {md_escape(self.searched.strip())}"
                         + ("" if self.replied else " ▌"))
        if self.replied:
            lines.append(f"{md_escape(''.join(self.replied))} ▌")
        return "  \n".join(lines)

    def _draw(self) -> None:
        self.placeholder.markdown(self.text())
