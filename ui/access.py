"""Who is using the app: sign-in (password or single sign-on), the identity of every run, sign-out.

``PAL_AUTH=local`` runs as the one local admin. ``PAL_AUTH=accounts`` asks who you are before any page:
a name and password (checked with :class:`review.throttle.SignInThrottle` backing off after repeated
failures per name and per client address), or Streamlit's own OIDC (``st.login``) when secrets.toml
has an ``[auth]`` section, whose identity maps to an account by e-mail. The identity is re-read from
the accounts on every run, so a removed account or a changed role takes effect at once. An identity
with no account gets no access.
"""

from __future__ import annotations

import logging
import math
import os

import streamlit as st

from review.access import FIRST_ADMIN, auth_mode, local_admin
from review.accounts import Account, AccountStore
from ui.platform_state import home_workspace
from ui.text import md_escape

log = logging.getLogger(__name__)
ACCOUNT_KEY = "review_account"


def client_address() -> str | None:
    """The browser's address: as Streamlit sees it, or — with ``PAL_TRUST_PROXY=1``, behind a reverse proxy
    that sets it — the first ``X-Forwarded-For`` hop (else every visitor would share the proxy's address)."""
    try:
        if os.environ.get("PAL_TRUST_PROXY") == "1":
            forwarded = st.context.headers.get("X-Forwarded-For") or st.context.headers.get("X-Real-IP") or ""
            if forwarded.strip():
                return forwarded.split(",")[0].strip()
        return st.context.ip_address
    except (AttributeError, RuntimeError):
        log.warning("no client address for this session", exc_info=True)
        return None


def sso_configured() -> bool:
    """True when secrets.toml has an ``[auth]`` section for ``st.login``."""
    try:
        return "auth" in st.secrets
    except (FileNotFoundError, st.errors.StreamlitSecretNotFoundError):
        log.debug("no secrets file: single sign-on is off", exc_info=True)
        return False


def sso_email() -> str | None:
    """The e-mail of a single sign-on identity in this session (None when nobody signed on)."""
    if not sso_configured():
        return None
    try:
        if not st.user.is_logged_in:
            return None
        return str(st.user.get("email") or "") or None
    except (AttributeError, KeyError):
        log.warning("single sign-on identity unreadable", exc_info=True)
        return None


def current_identity(accounts: AccountStore) -> Account | None:
    """The account of this browser session, re-checked against the accounts on every run; None: nobody."""
    if auth_mode() == "local":
        return local_admin()
    email = sso_email()
    if email is not None:
        account = accounts.by_email(email)
        if account is not None and not st.session_state.get("_auth_sso_logged"):
            st.session_state["_auth_sso_logged"] = True
            home_workspace().audit.record(account.name, "auth.sign_in", account.name, via="sso", email=email)
        return account
    held = st.session_state.get(ACCOUNT_KEY)
    if not held:
        return None
    account = accounts.get(held["name"])
    if account is None:
        st.session_state.pop(ACCOUNT_KEY, None)
    return account


def actor_name() -> str:
    """The name audit entries record for this browser session's actions."""
    account = current_identity(home_workspace().accounts)
    return account.name if account else "anonymous"


def sign_out() -> None:
    st.session_state.pop(ACCOUNT_KEY, None)
    st.query_params.clear()
    if sso_email() is not None:
        st.logout()


def render_sign_in(accounts: AccountStore) -> None:
    """The only thing a signed-out visitor sees: how to create the first admin, or the sign-in form."""
    st.title("PAL Studio")
    if accounts.count() == 0:
        st.info(f"No accounts exist yet. On the server, create the first admin with `{FIRST_ADMIN}` "
                "(it asks for a password), then sign in here. A single person on their own machine can run "
                "`make run` instead (PAL_AUTH=local, no sign-in).")
        return
    email = sso_email()
    if email is not None:
        st.error(f"The identity {md_escape(email)} has no account here; ask an admin to add one "
                 "(`pal users add NAME --role … --email …`).")
        _audit_refusal(email)
        st.button("Sign out", key="auth_sso_logout", on_click=sign_out)
        return
    st.caption("Sign in to continue.")
    with st.form("review_login"):
        name = st.text_input("Name", key="review_login_name")
        password = st.text_input("Password", type="password", key="review_login_password")
        if st.form_submit_button("Sign in", key="review_login_submit", type="primary"):
            _check(accounts, name, password)
    if sso_configured():
        st.button("Sign in with single sign-on", key="auth_sso_login", icon=":material/login:", on_click=st.login)


def _check(accounts: AccountStore, name: str, password: str) -> None:
    client = client_address()
    throttle = home_workspace().sign_in_throttle  # one per server process: shared by every browser session
    wait = throttle.wait_s(name, client)
    if wait > 0:
        st.error(f"Too many failed sign-ins for this name or from this address. Try again in {math.ceil(wait)} s.")
        return
    account = accounts.verify(name, password)
    if account is None:
        throttle.failed(name, client)
        st.error("Unknown name or wrong password.")
        return
    throttle.succeeded(name, client)
    st.session_state[ACCOUNT_KEY] = {"name": account.name}
    home_workspace().audit.record(account.name, "auth.sign_in", account.name, via="password", client=client)
    st.rerun()


def _audit_refusal(email: str) -> None:
    key = f"_auth_refusal_logged_{email}"
    if not st.session_state.get(key):
        st.session_state[key] = True
        home_workspace().audit.record(email, "auth.refused", email, via="sso")
