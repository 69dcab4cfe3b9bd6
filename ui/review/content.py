"""What a reviewer sees of one item: a session's logs and dialogue, the two dialogues of a pairwise item (first,
with the user's profile and preferences folded below them), or the memory item with its sources. All text from data goes through :func:`ui.text.md_escape` or a dataframe cell.
"""

from __future__ import annotations

import logging

import streamlit as st

from palset.dataset import Dataset
from review.batches import shown_order
from ui.platform_state import base_workspace
from ui.review.simturns import simturn_content
from ui.text import md_escape

log = logging.getLogger(__name__)


CANNOT_SHOW = ("This item cannot be shown here: what it refers to is not in the active dataset or on this server. "
               "Skip it, and tell whoever made the batch.")


def render_content(batch: dict, item: dict | None, dataset: Dataset, *, blinded: bool = True) -> bool:
    """The item's content; False when it cannot be shown (then nothing may be answered about it). ``blinded``: the
    reason stays in the log (it can name a method or a run), the person sees only that the item cannot be shown."""
    try:
        if item is None:
            raise KeyError("no such item")
        p = item["payload"]
        if batch["task"] == "quality":
            quality_content(p, dataset)
        elif batch["task"] == "pairwise":
            pairwise_content(p, dataset)
        elif batch["task"] == "simturn":
            simturn_content(p, dataset)
        else:
            memory_content(p, dataset)
        return True
    except (KeyError, ValueError, TypeError) as e:
        log.warning("review item %s/%s cannot be shown: %s", batch.get("batch_id"), (item or {}).get("item_no"), e)
        st.error(CANNOT_SHOW if blinded else f"This item cannot be shown: {md_escape(e)}")
        return False


def load_user(dataset: Dataset, uid: str):
    user = dataset.users.get(uid)
    if user is None:
        raise KeyError(f"user {uid} is not in the active dataset")
    return user


def profile(user) -> None:
    if user.profile:
        pr = user.profile
        st.markdown(f"**{md_escape(pr.name)}** · {md_escape(pr.gender)} · {pr.age} · {md_escape(pr.occupation)}  \n"
                    f"Hobbies: {md_escape(pr.hobbies)}")


def folded_profile(user, session) -> None:
    """The user's profile and preferences, folded below what is judged (the item's dialogues come first)."""
    with st.expander("About this user: profile and preferences"):
        profile(user)
        preferences(user, session)


def preferences(user, session) -> None:
    lines = []
    for t in session.topics if session else []:
        pref = user.preferences.get(t.requirement_type_id or "")
        if pref:
            lines.append(f"- {md_escape(pref.requirement)}: likes {md_escape(pref.preference.pos)}; "
                         f"dislikes {md_escape(pref.preference.neg)}")
    if lines:
        st.markdown("**Preferences**\n" + "\n".join(lines))


def quality_content(p: dict, dataset: Dataset) -> None:
    user = load_user(dataset, p["user_id"])
    session = user.session(p["sample_id"])
    if session is None:
        raise KeyError(f"session {p['sample_id']} is not in the active dataset")
    situation = user.situations.get(session.situation_id or "")
    if situation:
        st.markdown(f"**Situation**: {md_escape(situation.situation)}")
    left, right = st.columns(2)
    with left.container(height=420):
        st.markdown(f"**Logs** ({len(session.logs)})")
        for lg in session.logs:
            st.markdown(f"`{lg.timestamp}` {md_escape(lg.content)}")
    with right.container(height=420):
        st.markdown(f"**Dialogue** ({len(session.turns)} turns)")
        for turn in session.turns:
            st.markdown(f"**User**: {md_escape(turn.user.content)}  \n**Assistant**: {md_escape(turn.assistant.content)}")
    folded_profile(user, session)


def pairwise_content(p: dict, dataset: Dataset) -> None:
    """Two dialogues as "Response A" and "Response B" in the item's seeded order; never a method name."""
    sims = base_workspace().sims
    shown_a, shown_b = shown_order(p)
    runs = {p["method_a"]: p["run_a"], p["method_b"]: p["run_b"]}
    user = dataset.users.get(p["user_id"])
    st.caption(f"{md_escape(p['sample_id'])} · {md_escape(p['topic_key'])}")
    cols = st.columns(2)
    for col, label, method in zip(cols, ("A", "B"), (shown_a, shown_b)):
        rec = sims.load(runs[method])
        with col.container(height=480):
            st.markdown(f"#### Response {label}")
            for u in rec.utterances:
                who = "User" if u.side == "user" else "Assistant"
                st.markdown(f"**{who}**: {md_escape(u.content)}")
    if user:
        folded_profile(user, user.session(p["sample_id"]))


def source_text(dataset: Dataset, uid: str, ref: str) -> str:
    kind, _, rest = ref.partition(":")
    user = dataset.users.get(uid)
    if kind in ("log", "turn") and user:
        sample_id, _, idx = rest.rpartition(":")
        session = user.session(sample_id)
        if session and idx.isdigit():
            n = int(idx)
            if kind == "log" and n < len(session.logs):
                return f"log {session.logs[n].timestamp}: {session.logs[n].content}"
            if kind == "turn" and n < len(session.turns):
                t = session.turns[n]
                return f"User: {t.user.content} / Assistant: {t.assistant.content}"
    return ref


def memory_content(p: dict, dataset: Dataset) -> None:
    st.markdown(f"**Memory item** ({md_escape(p['layer'])}, from {md_escape(p['session_id'])})")
    st.info(md_escape(p["text"]))
    st.markdown("**Provenance**")
    if not p["provenance"]:
        st.caption("No sources recorded.")
    for ref in p["provenance"]:
        st.markdown(f"- `{md_escape(ref)}` {md_escape(source_text(dataset, p.get('user_id', ''), ref))}")
