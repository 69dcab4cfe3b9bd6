"""The Review page's Accounts tab (admins): every account with its sign-ins in use, and a way to end them."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import streamlit as st

from review.accounts import Account
from ui.access import actor_name
from ui.platform_state import home_workspace


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _end(name: str) -> None:
    ws = home_workspace()
    ended = ws.sessions.end_all(name)
    ws.audit.record(actor_name(), "auth.sessions_ended", name, sessions=ended)
    st.session_state["review_accounts_flash"] = f"Ended {ended} sign-in session(s) of {name}; single sign-on " \
                                                "sign-ins must sign on again."


def render_accounts(me: Account) -> None:
    ws = home_workspace()
    people = ws.accounts.list()
    sessions = ws.sessions.list()
    if flash := st.session_state.pop("review_accounts_flash", None):
        st.success(flash)
    if people:
        in_use = {a.name: sum(s.account == a.name for s in sessions) for a in people}
        st.dataframe(pd.DataFrame([{**a.model_dump(), "sessions": in_use[a.name]} for a in people]),
                     hide_index=True)
    if sessions:
        st.markdown("**Sign-in sessions in use**")
        st.dataframe(pd.DataFrame([{"account": s.account, "session": s.ref, "signed in": _when(s.created_at),
                                    "last used": _when(s.last_seen), "until": _when(s.expires_at),
                                    "address": s.client or "", "browser": s.user_agent or ""} for s in sessions]),
                     hide_index=True)
    names = [a.name for a in people]
    if names:
        cols = st.columns([3, 2])
        who = cols[0].selectbox("End every sign-in of", names, key="review_accounts_end_who",
                                index=None, placeholder="an account")
        cols[1].button("End sign-ins", key="review_accounts_end", icon=":material/logout:", disabled=who is None,
                       on_click=_end, args=(who,), help="Password sessions end at once; single sign-on identities "
                       "signed in before now must sign on again." + (" This includes yours." if who == me.name else ""))
    st.caption("Add, change or remove accounts with `pal users add NAME --role admin|researcher|annotator [--email E]`, "
               "`pal users password NAME`, `pal users role NAME ROLE` and `pal users remove NAME` (a changed password "
               "or role ends the account's sign-ins); `pal users sessions` and `pal users sign-out NAME` do what "
               "this tab does.")
