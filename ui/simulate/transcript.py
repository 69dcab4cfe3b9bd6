"""How a simulation run reads on the Simulate page: its header, its utterances (act badges, avatars that
tell simulator, person and assistant apart, the retrieved memory and prompt of each assistant turn) and exports.

All text from data goes through :func:`ui.text.md_escape`, a dataframe cell or ``st.code``.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
import streamlit.components.v1 as components
from streamlit.delta_generator import DeltaGenerator

from backends.llm.context import describe_cuts
from evaluation.simfidelity.types import TurnChecks
from sim.export import run_to_json, run_to_markdown, speaker
from sim.interventions import NOT_KEPT, decision_of, kind_of
from sim.types import RunRecord, Utterance
from ui.charts import ACT_COLOURS
from ui.methods import method_label
from ui.simulate.checks import render_turn_checks
from ui.simulate.status import end_reason
from ui.text import md_escape

SIDES = {"user": ("Simulator", "Me"), "assistant": ("Assistant", "Me")}
AVATARS = {"simulator": ":material/person:", "assistant": ":material/smart_toy:", "human": ":material/keyboard:"}
STATUS_COLOURS = {"running": "blue", "finished": "green", "stopped": "orange", "failed": "red"}


FOLLOW_TURNS = "sim_follow_turns"  # the toggle: the page scrolls to each new turn while a run goes
_SCROLL = """<script>
const doc = window.parent.document; // move {n}
const main = doc.querySelector('[data-testid="stMain"]') || doc.querySelector('section.main');
if (main) {{ main.scrollTo({{top: main.scrollHeight, behavior: "smooth"}}); }}
</script>"""


def follow_newest(slot: DeltaGenerator, move: int) -> None:
    """Scroll the page down to the newest turn (``move`` makes each request new), unless the person switched
    following off."""
    if st.session_state.get(FOLLOW_TURNS, True):
        with slot:
            components.html(_SCROLL.format(n=move), height=0)


def columns_for(n: int) -> list:
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
    if made := made_with(record):
        st.caption(f"Made with {md_escape(made)}")
    if record.status == "failed":
        st.error(f"The run stopped on an error: {md_escape(record.error or 'unknown')}. "
                 "Every saved turn is kept; press Resume to continue.")
    elif ended := end_reason(record):
        st.caption(f"Ended: {md_escape(ended)}")


def made_with(record: RunRecord) -> str:
    """Which models played each role of the run (from its settings; no keys are stored there)."""
    parts = [f"{role.replace('_', ' ')}: {s.get('model')} ({s.get('provider')})"
             for role, s in record.settings.items() if isinstance(s, dict) and s.get("model")]
    return " · ".join(parts)


def export_buttons(record: RunRecord) -> None:
    c1, c2 = st.columns(2)
    c1.download_button("Export JSON", run_to_json(record), file_name=f"{record.run_id}.json", mime="application/json",
                       icon=":material/download:", key=f"sim_json_{record.run_id}", on_click="ignore")
    c2.download_button("Export Markdown", run_to_markdown(record), file_name=f"{record.run_id}.md",
                       mime="text/markdown", icon=":material/download:", key=f"sim_md_{record.run_id}",
                       on_click="ignore")


def chat_for(side: str, actor: str):
    """A chat message with a name and avatar that tell the simulator, a person and the assistant apart."""
    return st.chat_message(speaker(side, actor), avatar=AVATARS[actor])


def badge_line(utt_act: str, turn_no: int, extra: str = "") -> str:
    colour = ACT_COLOURS.get(utt_act, "gray")
    return f":{colour}-badge[{md_escape(utt_act)}] :gray[turn {turn_no}{extra}]"


def render_utterance(utt: Utterance, run_id: str, checks: TurnChecks | None = None) -> None:
    with chat_for(utt.side, utt.actor):
        utterance_body(utt, run_id, checks)


def utterance_body(utt: Utterance, run_id: str, checks: TurnChecks | None = None) -> None:
    """Act badge, text, the simulator checks of a user turn (when checked), and for the assistant what memory
    gave it and the exact prompt."""
    extra = f" · {utt.attempts} tries" if utt.attempts > 1 else ""
    st.markdown(f"{badge_line(utt.act.value, utt.turn_no, extra)}  \n{md_escape(utt.content)}")
    if checks is not None:
        render_turn_checks(checks, f"{run_id}_{utt.turn_no}")
    if utt.fallback:
        st.caption(f":orange[Not the model's draft — {md_escape(utt.fallback)}]")
    if utt.actor == "simulator" and kind_of(utt) != "none":
        with st.expander(f"Interventions ({kind_of(utt)})"):
            st.markdown(intervention_lines(utt))
    if cuts := utterance_cuts(utt):
        st.caption(f":orange[Prompt fitted to the context window — {md_escape(cuts)}]")
    if utt.reasoning:
        with st.expander("Reasoning (kept apart from the answer)"):
            st.code(utt.reasoning, language=None, wrap_lines=True)
    if utt.actor == "assistant":
        with st.expander("Memory and prompt"):
            memory_and_prompt(utt, f"{run_id}_{utt.turn_no}")
    elif utt.actor == "simulator" and utt.prompt:
        with st.expander("Prompt"):
            st.code(utt.prompt, language=None, wrap_lines=True)


def intervention_lines(utt: Utterance) -> str:
    """A simulated user turn's interventions as Markdown: its decision, each draft with why it was sent back, or —
    stored before drafts were kept — that they were not kept."""
    lines = []
    if (decision := decision_of(utt)) is not None:
        lines.append(f"- **Decision**: {decision.field} = {'yes' if decision.value else 'no'} (stance "
                     f"{decision.stance}{'; read back from the fallback text' if decision.derived else ''})")
    for n, draft in enumerate(utt.drafts, 1):
        why = "kept" if draft.kept else "sent back: " + ("; ".join(draft.reasons) or "no reason recorded")
        lines.append(f"- **Draft {n}** ({md_escape(why)}): {md_escape(draft.text)}")
    if not utt.drafts_kept:
        lines.append(f"- {utt.attempts} call(s); {md_escape(NOT_KEPT)}.")
    return "\n".join(lines)


def utterance_cuts(utt: Utterance) -> str:
    """Every cut made to fit this utterance's prompt (memory and dialogue), as one line; "" when none."""
    return describe_cuts([*((utt.trace or {}).get("cuts") or []), *utt.cuts])


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
        counter = trace.get("token_counter") or "estimate"
        new = " new in this turn's note" if trace.get("repeated") else ""
        st.caption(f"Memory context: {tokens:,} tokens{new} · full history: {full:,} tokens{share} · "
                   f"purpose {md_escape(trace.get('purpose', '?'))} · counted by {md_escape(counter)}")
        items = trace.get("items", [])
        if items:
            st.dataframe(pd.DataFrame([{"layer": i["layer"], "score": i["score"], "text": i["text"]} for i in items]),
                         hide_index=True, width="stretch", key=f"sim_items_{key}",
                         column_config={"text": st.column_config.TextColumn("text", width="large")})
        else:
            st.caption("No items retrieved.")
        if repeated := trace.get("repeated"):
            st.caption(f"{len(repeated)} of the memory's parts were already in an earlier turn's note, which stays in "
                       "the transcript: this turn's note does not repeat them.")
    st.markdown("**Prompt**")
    st.code(utt.prompt or "(not recorded)", language=None, wrap_lines=True, height=260)
