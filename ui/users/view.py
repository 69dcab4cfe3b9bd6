"""Rendering of the Users page: gallery, user view (profile, timeline, logs, sessions) and session view.

State lives in the URL: ``?user=…`` opens a user, ``&tab=…`` a tab and ``&session=…`` a session, so
every view can be pasted as a link. All text from data goes through :func:`ui.text.md_escape`
or a dataframe cell, never through HTML.
"""

from __future__ import annotations

import streamlit as st

from backends.csvsafe import frame_to_csv
from palset.dataset import Dataset, Session, SessionTopic, User
from palset.vocab import ASPECTS, BIG_FIVE, LogType
from ui.charts import ACT_COLOURS, FEEDBACK_COLOURS, build_big_five_radar, build_timeline_figure
from ui.tables import GalleryFilter, LogFilter, big_five_short, filter_users, gallery_frame, log_frame
from ui.text import first_sentence, md_escape, md_inline
from ui.url_state import UrlState

TABS = ["Profile", "Timeline", "Logs", "Sessions"]


# ---------------------------------------------------------------- navigation helpers


def open_user(uid: str) -> None:
    _forget_view()
    st.query_params["user"] = uid


def close_user() -> None:
    _forget_view()
    st.query_params.pop("user", None)


def _forget_view() -> None:
    for param in _STATE_KEYS:
        _URL.forget(param)


_STATE_KEYS = {"tab": "user_tab", "session": "session_select"}
_URL = UrlState(_STATE_KEYS, "users")


def _open_selected_session() -> None:
    """Timeline callback: a click on a session marker opens that session."""
    event = st.session_state.get("timeline_chart") or {}
    sample_id = session_from_points(event.get("selection", {}).get("points", []))
    if sample_id:
        st.session_state[_STATE_KEYS["session"]] = sample_id
        st.session_state[_STATE_KEYS["tab"]] = "Sessions"


def session_from_points(points: list[dict]) -> str | None:
    """The sample id carried by the first selected session marker, if any."""
    for point in points:
        data = point.get("customdata")
        if isinstance(data, list):
            data = data[0] if data else None
        if isinstance(data, str) and "_sample" in data:
            return data
    return None


# ---------------------------------------------------------------- gallery


def render_gallery(dataset: Dataset) -> None:
    st.title("Users")
    if not dataset.users:
        st.info("This dataset has no users. Pick another dataset in the sidebar.")
        return
    flt = _gallery_filter_widgets(dataset)
    users = filter_users(dataset, flt)
    st.caption(f"{len(users)} of {len(dataset.users)} users")
    view = st.segmented_control("View", ["Cards", "Table"], default="Cards", key="gallery_view", label_visibility="collapsed")
    frame = gallery_frame(users)
    if view == "Table":
        st.dataframe(frame, hide_index=True, width="stretch")
    else:
        _render_cards(users)
    st.download_button("Export this list (CSV)", frame_to_csv(frame), file_name=f"{dataset.name}-users.csv",
                       mime="text/csv", icon=":material/download:")


def _gallery_filter_widgets(dataset: Dataset) -> GalleryFilter:
    c1, c2, c3, c4 = st.columns([3, 1.2, 1.2, 2])
    text = c1.text_input("Search", placeholder="name, occupation, family, hobby…", key="gallery_search")
    langs = sorted({u.language for u in dataset.users.values()})
    genders = sorted({u.profile.gender for u in dataset.users.values() if u.profile})
    languages = c2.multiselect("Language", langs, key="gallery_lang")
    gender = c3.multiselect("Gender", genders, key="gallery_gender")
    t1, t2 = c4.columns(2)
    trait = t1.selectbox("Trait", ["any", *BIG_FIVE], key="gallery_trait")
    level = t2.selectbox("Level", ["low", "medium", "high"], key="gallery_level", disabled=trait == "any")
    return GalleryFilter(text=text, languages=languages, genders=gender,
                         trait=None if trait == "any" else trait, level=level)


def _render_cards(users: list[User]) -> None:
    per_row = 3
    for start in range(0, len(users), per_row):
        cols = st.columns(per_row)
        for col, user in zip(cols, users[start : start + per_row]):
            with col.container(border=True):
                p = user.profile
                title = md_escape(user.name)
                meta = f"{p.age} · {md_escape(p.gender)}" if p else ""
                st.markdown(f"**{title}** &nbsp; :gray[{md_escape(user.uid)} · {meta} · {user.language}]")
                if p:
                    st.caption(md_escape(first_sentence(p.occupation)))
                st.caption(md_escape(big_five_short(user)))
                c = user.counts
                st.caption(f"{c.sessions} sessions ({c.query_sessions} query) · {c.logs} logs · {c.topics} topics")
                if st.button("Open", key=f"open_{user.uid}", icon=":material/arrow_forward:"):
                    open_user(user.uid)
                    st.rerun()


# ---------------------------------------------------------------- user view


def render_user(dataset: Dataset, user: User) -> None:
    if st.button("All users", icon=":material/arrow_back:", type="tertiary"):
        close_user()
        st.rerun()
    p = user.profile
    st.title(md_inline(user.name))
    if p:
        st.caption(f"{md_escape(user.uid)} · {p.age} · {md_escape(p.gender)} · {user.language} · {md_escape(big_five_short(user))}")
    _URL.sync("tab", TABS, "Sessions" if st.query_params.get("session") else "Profile")
    tabs = st.tabs(TABS, key=_STATE_KEYS["tab"], on_change="rerun")
    _URL.write("tab")
    renderers = [render_profile, render_timeline, render_logs, render_sessions]
    for tab, renderer in zip(tabs, renderers):
        if tab.open is False:
            continue
        with tab:
            renderer(dataset, user)


def render_profile(dataset: Dataset, user: User) -> None:
    p = user.profile
    if p is None:
        st.info("No profile for this user (background file absent or invalid).")
    else:
        left, right = st.columns([3, 2])
        with left:
            for label, text in (("Occupation", p.occupation), ("Health", p.health_status),
                                ("Family", p.family_members), ("Hobbies", p.hobbies)):
                st.markdown(f"**{label}**  \n{md_escape(text)}")
        with right:
            st.plotly_chart(build_big_five_radar(p.personality, p.name), key="big_five", config={"displayModeBar": False})
    st.subheader("Requirement types and preferences")
    if not user.requirement_types:
        st.caption("No requirement types in this dataset.")
        return
    for col, aspect in zip(st.columns(2) * 2, ASPECTS):
        with col:
            st.markdown(f"**{aspect.capitalize()}**")
            for rid, phrase in user.requirement_types.get(aspect, {}).items():
                with st.expander(f"{md_escape(rid)} · {md_escape(phrase)}"):
                    pref = user.preferences.get(rid)
                    if pref is None:
                        st.caption("No preference recorded.")
                        continue
                    st.markdown(f":green-badge[accepts] {md_escape(pref.preference.pos)}")
                    st.markdown(f":red-badge[rejects] {md_escape(pref.preference.neg)}")


def render_timeline(dataset: Dataset, user: User) -> None:
    if not (user.sessions or user.situations or user.timeline):
        st.info("No timeline, situations or sessions for this user in this dataset.")
        return
    st.plotly_chart(
        build_timeline_figure(user), key="timeline_chart", on_select=_open_selected_session,
        selection_mode="points", config={"displayModeBar": False, "scrollZoom": True},
    )
    st.caption("Bars: months, then situations coloured by their first aspect. Diamonds: sessions — click one to open it. "
               "Bottom: logs per day and type.")
    if user.timeline:
        st.subheader("Months")
        for month, text in user.timeline.items():
            with st.expander(md_escape(month)):
                st.markdown(md_escape(text))
    if user.situations:
        st.subheader("Situations")
        kept = {s.situation_id: s for s in user.sessions}
        for end_date, sit in user.situations.items():
            session = kept.get(end_date)
            tag = f" · session {session.sample_id}" if session else ""
            phrases = ", ".join(user.requirement_phrase(r) or r for r in sit.requirement_ids)
            with st.expander(f"{sit.start_timestamp:%d %b} – {sit.end_timestamp:%d %b %Y}{tag} · {md_escape(phrases)}"):
                st.markdown(md_escape(sit.situation))


def render_logs(dataset: Dataset, user: User) -> None:
    frame_all = log_frame(user)
    if frame_all.empty:
        st.info("No logs for this user in this dataset.")
        return
    c1, c2, c3 = st.columns([2, 2, 3])
    types = c1.multiselect("Type", [t.value for t in LogType], key="log_types")
    first, last = frame_all["time"].min().date(), frame_all["time"].max().date()
    span = c2.date_input("Dates", (first, last), min_value=first, max_value=last, key="log_dates")
    text = c3.text_input("Contains", key="log_text")
    start, end = (span if isinstance(span, tuple) and len(span) == 2 else (first, last))
    frame = log_frame(user, LogFilter(types=types, start=start, end=end, text=text))
    inferred = frame["type"].str.endswith("(inferred)").sum() if not frame.empty else 0
    st.caption(f"{len(frame)} of {len(frame_all)} logs" + (f" · {inferred} with inferred type" if inferred else ""))
    st.dataframe(frame, hide_index=True, width="stretch", column_config={
        "time": st.column_config.DatetimeColumn("time", format="YYYY-MM-DD HH:mm"),
        "content": st.column_config.TextColumn("content", width="large"),
    })
    st.download_button("Export logs (CSV)", frame_to_csv(frame), file_name=f"{user.uid}-logs.csv", mime="text/csv",
                       icon=":material/download:")


def render_sessions(dataset: Dataset, user: User) -> None:
    if not user.sessions:
        st.info("No sessions: this dataset has no input file (partial release).")
        return
    ids = [s.sample_id for s in user.sessions]
    _URL.sync("session", ids, ids[0])
    by_id = {s.sample_id: s for s in user.sessions}
    sample_id = st.selectbox(
        "Session", ids, key=_STATE_KEYS["session"],
        format_func=lambda i: f"{i} · {by_id[i].split} · {by_id[i].dialogue_timestamp:%Y-%m-%d %H:%M} · {len(by_id[i].topics)} topic(s)",
    )
    _URL.write("session")
    render_session(user, by_id[sample_id])


# ---------------------------------------------------------------- session view


def render_session(user: User, session: Session) -> None:
    sit = user.situations.get(session.situation_id or "")
    if sit:
        st.markdown(f"**Situation** ({sit.start_timestamp:%d %b} – {sit.end_timestamp:%d %b})  \n{md_escape(sit.situation)}")
    left, right = st.columns([2, 3])
    with left:
        st.markdown(f"**Logs** ({len(session.logs)})")
        st.dataframe(log_frame(user, LogFilter(session=session.sample_id)).drop(columns=["session"]),
                     hide_index=True, height=560, width="stretch")
    with right:
        st.markdown(f"**Dialogue** ({len(session.turns)} turns, {session.dialogue_timestamp:%Y-%m-%d %H:%M})")
        with st.container(height=560):
            for n, turn in enumerate(session.turns, start=1):
                for role, utt in (("user", turn.user), ("assistant", turn.assistant)):
                    with st.chat_message(role, avatar=":material/person:" if role == "user" else ":material/smart_toy:"):
                        colour = ACT_COLOURS.get(utt.action.value, "gray")
                        st.markdown(f":{colour}-badge[{utt.action.value}] :gray[turn {n}]  \n{md_escape(utt.content)}")
    st.subheader("Topics")
    for st_topic in session.topics:
        render_topic(user, session, st_topic)


def render_topic(user: User, session: Session, st_topic: SessionTopic) -> None:
    t = st_topic.topic
    with st.container(border=True):
        st.markdown(f"**{st_topic.key}** · {md_escape(session.task_id(st_topic.key))}"
                    + (f" · type {md_escape(st_topic.requirement_type_id)}: {md_escape(st_topic.requirement_type or '')}"
                       if st_topic.requirement_type_id else ""))
        st.markdown(f"**User query:** {md_escape(t.user_query)}")
        needs = st_topic.framework.implicit_needs if st_topic.framework else None
        st.markdown("**Implicit needs**")
        for i, need in enumerate(t.implicit_needs):
            evid = needs[i].evidences if needs and i < len(needs) else []
            line = f"{i + 1}. {md_escape(need)}"
            if evid:
                line += "  \n" + "  \n".join(f":gray[evidence: {md_escape(e)}]" for e in evid)
            st.markdown(line)
        st.markdown(f"**Requirement:** {md_escape(t.requirement)}")
        pref = user.preferences.get(st_topic.requirement_type_id or "")
        if pref:
            with st.expander("Preference of this requirement type"):
                st.markdown(f":green-badge[accepts] {md_escape(pref.preference.pos)}")
                st.markdown(f":red-badge[rejects] {md_escape(pref.preference.neg)}")
        reasons = {}
        if st_topic.solution_preference:
            sp = st_topic.solution_preference
            reasons = {r.solution: r.feedback_reason for r in sp.pos_list + sp.neg_list}
        st.markdown("**Candidate solutions**")
        for i, cand in enumerate(t.candidate_solutions, start=1):
            colour = FEEDBACK_COLOURS[cand.feedback]
            why = f"  \n:gray[{md_escape(reasons[cand.solution])}]" if cand.solution in reasons else ""
            st.markdown(f":{colour}-badge[S{i} {cand.feedback}] {md_escape(cand.solution)}{why}")
