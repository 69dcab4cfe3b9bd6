"""PAL Studio entry point: navigation and the shared sidebar. Pages live in pages/."""

from pathlib import Path

import streamlit as st

from ui.shell import active_dataset, render_sidebar

st.set_page_config(page_title="PAL Studio", page_icon=str(Path(__file__).parent / "ui" / "assets" / "icon.png"), layout="wide")

PAGES = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", url_path="home", default=True),
    st.Page("pages/users.py", title="Users", icon=":material/group:", url_path="users"),
    st.Page("pages/memory.py", title="Memory", icon=":material/hub:", url_path="memory"),
    st.Page("pages/simulate.py", title="Simulate", icon=":material/forum:", url_path="simulate"),
    st.Page("pages/evaluate.py", title="Evaluate", icon=":material/balance:", url_path="evaluate"),
    st.Page("pages/generate.py", title="Generate", icon=":material/person_add:", url_path="generate"),
    st.Page("pages/review.py", title="Review", icon=":material/rate_review:", url_path="review"),
    st.Page("pages/settings.py", title="Settings", icon=":material/settings:", url_path="settings"),
]

page = st.navigation(PAGES, position="top")
render_sidebar(active_dataset())
page.run()
