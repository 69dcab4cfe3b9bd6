"""``streamlit run serve.py`` (what ``make run``, ``make present`` and ``make serve`` run): the app (``app.py``) with
its sign-in route, behind its front door.

Streamlit serves ``app.py`` exactly as ``streamlit run app.py`` would, plus ``POST /auth/sign-in`` on the same
origin (``ui.web_auth``): the one place a password sign-in becomes an HttpOnly session cookie; and every request
first passes :class:`ui.web_guard.OriginGuard`: a websocket only from the app's own origin (``PAL_PUBLIC_URL`` when
set), a Host the app answers to (loopback names in local mode, where only this machine is answered), no metrics, and
no widget callback for a connection that signs nobody in. Every ``streamlit run`` option applies as usual."""

import streamlit as st
from starlette.middleware import Middleware

from ui.access import connection_signed_in
from ui.warmup import warm_demo_at_start
from ui.web_auth import routes, without_uvicorn_proxy_headers
from ui.web_guard import OriginGuard, OriginPolicy

# uvicorn (Streamlit's server) takes a loopback peer's address from X-Forwarded-For by default; the visitor's address
# is decided by review.clients instead, which believes only the hop a proxy named in PAL_TRUST_PROXY adds.
without_uvicorn_proxy_headers()

policy = OriginPolicy.from_env()  # a malformed PAL_PUBLIC_URL or PAL_AUTH stops the server here, named
app = st.App("app.py", routes=routes(), middleware=[Middleware(OriginGuard, policy=policy,
                                                                       signed_in=connection_signed_in)])


# The demo tour made ready before the server answers (make run sets PAL_DEMO_WORKSPACE): its pages imported, the
# workspace opened, what its stops show computed from the stored records, its warm-up started in the background; a
# stop opened as the server's first view then neither imports pandas, chromadb and its page's modules nor computes
# its figures in front of the viewer. Done here, before any session exists, because two threads importing one
# package graph can fail with a deadlock error.
warm_demo_at_start()
