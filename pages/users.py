"""Users: gallery of the active dataset's users, and one user's profile, timeline, logs and sessions."""

import streamlit as st

from ui.shell import active_dataset, require_router
from ui.text import md_escape
from ui.users.view import render_gallery, render_user

require_router()
dataset = active_dataset()
uid = st.query_params.get("user")
user = dataset.users.get(uid) if uid else None
if uid and user is None:
    st.warning(f"No user with id {md_escape(repr(uid))} in dataset {md_escape(repr(dataset.name))}; showing all users.")
if user is None:
    render_gallery(dataset)
else:
    render_user(dataset, user)
