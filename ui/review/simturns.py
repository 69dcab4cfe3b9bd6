"""The Review page's ``simturn`` batches — people check the checker: what an annotator sees of one simulated user
turn (blinded: no simulator, model, method or automatic outcome), the candidates a new batch draws from, and the
agreement of the automatic checks with the people's answers (Cohen's and Fleiss' κ) with its export.

All text from data goes through :func:`ui.text.md_escape` or a dataframe cell.
"""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from evaluation.simfidelity.agreement import checker_agreement
from evaluation.simfidelity.export import checker_csv
from evaluation.simfidelity.service import matchers, measure_runs
from palset.dataset import Dataset, dataset_key
from review.batches import simturn_candidates
from review.store import ReviewStore
from sim.reference import topic_turns
from ui.platform_state import base_workspace, workspace
from ui.presenting import writes_allowed
from ui.text import md_escape

log = logging.getLogger(__name__)
FEEDBACK_WORDS = {"pos": "liked", "neg": "disliked", "neu": "neutral"}


def candidates(dataset: Dataset, variants: list[str] | None) -> list[tuple[str, dict]]:
    """Every simulated user turn of the dataset's finished runs (of the chosen simulators)."""
    sims = base_workspace().sims
    turns = []
    for row in sims.list(dataset=dataset_key(dataset.root), status="finished"):
        record = sims.load(row["run_id"])
        if variants is not None and record.spec.simulator_variant not in variants:
            continue
        turns += [{"run_id": record.run_id, "user_id": record.spec.user_id, "sample_id": record.spec.sample_id,
                   "topic_key": record.spec.topic_key, "turn_no": u.turn_no, "act": u.act.value}
                  for u in record.utterances if u.side == "user" and u.actor == "simulator"]
    return simturn_candidates(turns)


def simturn_content(p: dict, dataset: Dataset) -> None:
    """Who the user is, what the dataset says they need and like, the dialogue up to the turn (the turn marked, with
    its scheduled act) — never who wrote it or what the automatic checks said."""
    user = dataset.users.get(p["user_id"])
    session = user.session(p["sample_id"]) if user else None
    topic = next((t for t in session.topics if t.key == p["topic_key"]), None) if session else None
    if user is None or topic is None:
        raise KeyError(f"topic {p['sample_id']} {p['topic_key']} of user {p['user_id']} is not in the active dataset")
    if user.profile:
        pr = user.profile
        st.markdown(f"**{md_escape(pr.name)}** · {md_escape(pr.gender)} · {pr.age} · {md_escape(pr.occupation)} · "
                    f"writes in {'Chinese' if user.language == 'zh' else 'English'}  \n"
                    f"Family: {md_escape(pr.family_members)}  \nHealth: {md_escape(pr.health_status)}")
    t = topic.topic
    with st.expander("What the dataset says about this topic", expanded=True):
        st.markdown(f"**The dataset's opening question**: {md_escape(t.user_query)}  \n"
                    f"**Hidden needs**: {md_escape('; '.join(t.implicit_needs))}  \n"
                    f"**Requirement**: {md_escape(t.requirement)}")
        if (pref := user.preferences.get(topic.requirement_type_id or "")) is not None:
            st.markdown(f"**Likes**: {md_escape(pref.preference.pos)}  \n**Dislikes**: {md_escape(pref.preference.neg)}")
        st.dataframe(pd.DataFrame([{"candidate solution": c.solution, "the user": FEEDBACK_WORDS.get(c.feedback, "?")}
                                   for c in t.candidate_solutions]), hide_index=True, width="stretch")
    record = base_workspace().sims.load(p["run_id"])
    st.caption(f"{md_escape(p['sample_id'])} · {md_escape(p['topic_key'])}")
    turn_no = int(p["turn_no"])
    before = [u for u in record.utterances if u.turn_no < turn_no]
    with st.container(height=320 if len(before) > 3 else "content"):
        for u in before:
            who = "User" if u.side == "user" else "Assistant"
            st.markdown(f"**{who}** :gray[{md_escape(u.act.value)}]: {md_escape(u.content)}")
        if not before:
            st.caption("(the dialogue's first turn)")
    turn = next((u for u in record.utterances if u.turn_no == turn_no and u.side == "user"), None)
    if turn is None:
        raise KeyError(f"run {p['run_id']} has no user turn {turn_no}")
    with st.container(border=True):
        st.markdown(f"**▶ The turn to check** :blue-badge[scheduled: {md_escape(turn.act.value)}]  \n"
                    f"{md_escape(turn.content)}")
    if (own := topic_turns(session, p["topic_key"])) and session is not None:
        with st.expander("The dataset's own dialogue of this topic (how this user talks)"):
            for turn in own:
                st.markdown(f"**User** :gray[{md_escape(turn.user.action.value)}]: {md_escape(turn.user.content)}")


def render_checker_agreement(store: ReviewStore, batch: dict) -> None:
    """The automatic checks against the people's answers of this batch, per check; the export."""
    st.markdown("**Automatic checks vs people**")
    report = checker_agreement(store, batch["batch_id"], base_workspace().simfidelity)
    if report["unchecked"] and writes_allowed():
        st.caption(f"{len(report['unchecked'])} answered item(s) belong to runs not checked yet.")
        if st.button("Check these runs", key=f"review_simfid_check_{batch['batch_id']}", icon=":material/fact_check:"):
            _check_batch_runs(store, batch)
    if not report["items"]:
        st.caption("No answered item with an automatic result yet.")
        return
    frame = pd.DataFrame([{k: v for k, v in q.items() if k != "confusion"} for q in report["questions"]])
    st.dataframe(frame, hide_index=True, key=f"review_simfid_{batch['batch_id']}")
    st.caption("Cohen's κ: the automatic check against the human majority (yes/no items; 'does not apply' on either "
               "side left out, counted). Fleiss' κ: the check and every annotator as raters.")
    with st.expander("Per item"):
        st.dataframe(pd.DataFrame(report["items"]), hide_index=True, key=f"review_simfid_items_{batch['batch_id']}")
    st.download_button("Checks vs people CSV", checker_csv(report), f"{batch['batch_id']}-checks-vs-people.csv",
                       "text/csv", key=f"review_simfid_csv_{batch['batch_id']}")


def _check_batch_runs(store: ReviewStore, batch: dict) -> None:
    ws = workspace()
    run_ids = sorted({i["payload"]["run_id"] for i in store.items(batch["batch_id"])})
    dataset_path = batch["dataset"]
    try:
        dataset = ws.dataset(dataset_path)
        records = [ws.sims.load(r) for r in run_ids]
    except (KeyError, ValueError) as e:
        log.warning("batch %s: runs cannot be checked: %s", batch["batch_id"], e)
        st.error(f"The batch's runs cannot be checked: {md_escape(e)}")
        return
    _results, errors = measure_runs(records, dataset, matchers(lambda language: ws.embedder(None, language)),
                                    ws.simfidelity)
    for run_id, error in errors.items():
        st.warning(f"{md_escape(run_id)}: {md_escape(error)}")
    if not errors:
        st.rerun()
