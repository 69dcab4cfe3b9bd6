"""``streamlit run serve.py`` (what ``make serve`` runs): the app (``app.py``) with its sign-in route.

Streamlit serves ``app.py`` exactly as ``streamlit run app.py`` would, plus ``POST /auth/sign-in`` on the same
origin (``ui.web_auth``): the one place a password sign-in becomes an HttpOnly session cookie. Every
``streamlit run`` option applies as usual (``make serve`` passes them)."""

import streamlit as st

from ui.web_auth import routes

app = st.App("app.py", routes=routes())
