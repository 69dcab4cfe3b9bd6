"""PAL Studio entry point: who is signed in, navigation built for their role, and the shared sidebar.

Pages live in pages/. A signed-out visitor (``PAL_AUTH=accounts``) sees only the sign-in; a page the
role may not open renders nothing of itself, only that it is not available. A session presenting a
bundle (``ui.presenting``) gets a banner on every page and no page that only writes (Generate, Settings).
A tour stop (``?tour=N``) shows its explanation and the way to the next stop above the page.
"""

from pathlib import Path

import streamlit as st

from review.access import AccessConfigError, may_open
from ui.access import connection_refusal, current_identity, render_sign_in
from ui.navigation import build_pages, chosen_path, landing_redirect, render_unavailable
from ui.platform_state import home_workspace, present_refusal, presenting
from ui.presenting import apply_projector, projector, render_banner
from ui.shell import active_dataset, render_identity, render_sidebar
from ui.text import md_escape
from ui.tour import render_tour_bar
from ui.warmup import start_demo_warmup

st.set_page_config(page_title="PAL Studio", page_icon=str(Path(__file__).parent / "ui" / "assets" / "icon.png"),
                   layout="wide", initial_sidebar_state="collapsed" if projector() else "auto")
apply_projector()
if refusal := present_refusal():  # PAL_PRESENT names a bundle that was refused: no page, only why
    st.error(f"This server is set to present a workspace bundle that cannot be opened. {md_escape(refusal)}",
             icon=":material/block:")
    st.stop()

if refusal := connection_refusal():  # a Host or Origin that is not this app's (DNS rebinding, another port's page)
    st.error(refusal, icon=":material/block:")
    st.stop()

accounts = home_workspace().accounts
start_demo_warmup(home_workspace())  # once per process: the demo tour's memories indexed in the background
try:
    account = current_identity(accounts)
except AccessConfigError as e:
    st.error(f"Configuration error: {e}")
    st.stop()
shows_bundle = presenting()  # once per run: it stats the bundle and looks up its cached workspace
pages = build_pages(account.role if account else None, presenting=shows_bundle)
page = st.navigation(list(pages.values()), position="top" if account else "hidden")
page_path = chosen_path(pages, page)
if account is not None:
    landing_redirect(pages, page_path, account.role, presenting=shows_bundle)
if account is None:
    render_sign_in(accounts, page_path)
elif not may_open(account.role, page_path, presenting=shows_bundle):
    render_unavailable(page.title, account.role, presenting=shows_bundle)
    with st.sidebar:
        render_identity(account)  # a way out: Sign out
else:
    dataset = active_dataset()
    render_sidebar(dataset, account)
    render_banner(account)
    render_tour_bar(dataset, page_path)
    page.run()
