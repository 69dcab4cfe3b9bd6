"""``streamlit run serve.py`` (what ``make serve`` runs): the app (``app.py``) with its sign-in route.

Streamlit serves ``app.py`` exactly as ``streamlit run app.py`` would, plus ``POST /auth/sign-in`` on the same
origin (``ui.web_auth``): the one place a password sign-in becomes an HttpOnly session cookie. Every
``streamlit run`` option applies as usual (``make serve`` passes them)."""

import streamlit as st

from ui.web_auth import routes, without_uvicorn_proxy_headers

# uvicorn (Streamlit's server) takes a loopback peer's address from X-Forwarded-For by default; the visitor's address
# is decided by review.clients instead, which believes only the hop a proxy named in PAL_TRUST_PROXY adds.
without_uvicorn_proxy_headers()

app = st.App("app.py", routes=routes())
