"""Who is using the app: sign-in (password or single sign-on), the identity of every run, sign-out.

``PAL_AUTH=local`` runs as the one local admin. ``PAL_AUTH=accounts`` asks who you are before any page:

* a name and password, in a plain HTML form that posts to the sign-in route (:mod:`ui.web_auth`, mounted by
  ``serve.py``), which answers with an HttpOnly session cookie (:mod:`review.sessions`) and sends the browser back
  to the page that was asked for. Every run reads the cookie this run's own connection brought
  (``st.context.cookies``) and resolves it against the store: reloads, new tabs and deep links stay signed in;
  a session that ended (signed out, ended by an admin, a changed password or role, idle or too old) signs nobody
  in; and nothing is kept in ``st.session_state``, so reconnecting to someone's Streamlit session id (it shows in
  upload URLs) gives their widgets, never their identity;
* Streamlit's own OIDC (``st.login``) when secrets.toml has an ``[auth]`` section: the identity maps to an account
  by a verified e-mail once, then by its issuer and subject (:meth:`review.accounts.AccountStore.for_identity`).

The identity is re-read on every run, so a removed account or a changed role takes effect at once; and before a
run's widget callbacks, by :class:`ui.web_guard.OriginGuard` through :func:`connection_identity`, so a click on a
page left open after a sign-out, a changed role or a removed account writes nothing. A password session counts
only on the connection that presents what it was bound to (:mod:`review.sessions`: the page's token in the
websocket's ``Sec-WebSocket-Protocol`` and the origin), and behind TLS only from the ``__Host-`` cookie.
"""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Mapping
from urllib.parse import urlencode

import streamlit as st

from review.access import FIRST_ADMIN, auth_mode, local_admin
from review.accounts import Account, AccountStore
from review.clients import client_address as _client_address
from review.sessions import COOKIE, TLS_COOKIE, sso_issued_at
from ui import web_auth
from ui.platform_state import home_workspace
from ui.text import md_escape

log = logging.getLogger(__name__)
XSRF_COOKIE = "_streamlit_xsrf"


def client_address() -> str | None:
    """The browser's address: Streamlit's peer, or — from a trusted proxy (``PAL_TRUST_PROXY``) — the
    ``X-Forwarded-For`` hop that proxy added (:mod:`review.clients`)."""
    try:
        return _client_address(st.context.ip_address, st.context.headers.get("X-Forwarded-For"))
    except (AttributeError, RuntimeError):
        log.warning("no client address for this session", exc_info=True)
        return None


def _headers() -> Mapping[str, str]:
    """The headers of this run's websocket handshake (empty where there is none: AppTest)."""
    try:
        return {k.lower(): v for k, v in st.context.headers.items()}
    except (AttributeError, RuntimeError):
        log.warning("no headers for this session", exc_info=True)
        return {}


def cookie_name(headers: Mapping[str, str]) -> str:
    """The session cookie a connection counts: ``__Host-`` when its page came over TLS (its Origin is https), so a
    cookie planted by a plain-HTTP page on the same host signs nobody in there."""
    return TLS_COOKIE if (headers.get("origin") or "").lower().startswith("https://") else COOKIE


def session_cookie() -> str | None:
    """The sign-in cookie this run's connection brought (read on every run, never stored)."""
    try:
        return st.context.cookies.get(cookie_name(_headers()))
    except (AttributeError, RuntimeError):
        log.warning("no cookies for this session", exc_info=True)
        return None


def presented(headers: Mapping[str, str]) -> dict[str, str | None]:
    """What a connection presents to its password session: the page token and the origin."""
    protocols = [p.strip() for p in (headers.get("sec-websocket-protocol") or "").split(",")]
    return {"page": web_auth.page_token(protocols[1] if len(protocols) > 1 else None), "origin": headers.get("origin")}


def connection_identity(cookies: Mapping[str, str], headers: Mapping[str, str]) -> Account | None:
    """Who a websocket handshake (its cookies and headers) signs in, outside any script run: a password session
    it presents everything for, else a single sign-on cookie Streamlit signed (mapped to its account)."""
    ws = home_workspace()
    cookie = cookies.get(cookie_name(headers))
    account = ws.sessions.resolve(cookie, **presented(headers)) if cookie else None
    if account is not None:
        return account
    claims = _signed_sso_claims(cookies, headers.get("origin") or "")
    return sso_account(ws.accounts, claims)[0] if claims else None


def connection_signed_in(headers: Mapping[str, str]) -> bool:
    """Whether a websocket handshake (its headers, lower-case names) still signs someone in: what
    :class:`ui.web_guard.OriginGuard` asks before a rerun's widget values reach their callbacks."""
    from starlette.requests import cookie_parser

    return connection_identity(cookie_parser(headers.get("cookie", "")), headers) is not None


def _signed_sso_claims(cookies: Mapping[str, str], origin: str) -> dict | None:
    """The claims in Streamlit's single sign-on cookie when its signature and origin hold (None otherwise)."""
    if not any(name.startswith("_streamlit_user") for name in cookies):
        return None
    from streamlit.web.server.starlette import starlette_websocket as sws

    try:
        raw = sws._get_signed_cookie_with_chunks(dict(cookies), sws.USER_COOKIE_NAME)
        claims = sws._parse_decoded_user_cookie(raw, origin) if raw else {}
    except (ValueError, TypeError, KeyError):
        log.warning("single sign-on cookie unreadable", exc_info=True)
        return None
    return claims if claims.get("is_logged_in") else None


def connection_refusal() -> str | None:
    """Why this run's connection is not the app's own page (its Host or Origin), or None. ``serve.py`` refuses such a
    websocket before it opens (:mod:`ui.web_guard`); this is the same rule for an app started without it."""
    from ui.web_guard import OriginPolicy

    headers = _headers()
    if not headers:
        return None
    policy = OriginPolicy.from_env()
    if not policy.origin_allowed(headers.get("origin"), headers.get("host")):
        log.warning("a page run from Host %r, Origin %r refused", headers.get("host"), headers.get("origin"))
        return ("This page was opened from an address this server does not answer "
                "(set PAL_PUBLIC_URL to the address people open).")
    return None


def sso_configured() -> bool:
    """True when secrets.toml has an ``[auth]`` section for ``st.login``."""
    try:
        return "auth" in st.secrets
    except (FileNotFoundError, st.errors.StreamlitSecretNotFoundError):
        log.debug("no secrets file: single sign-on is off", exc_info=True)
        return False


def sso_claims() -> dict | None:
    """The claims of a single sign-on identity in this session (None when nobody signed on)."""
    if not sso_configured():
        return None
    try:
        if not st.user.is_logged_in:
            return None
        return dict(st.user.to_dict())
    except (AttributeError, KeyError):
        log.warning("single sign-on identity unreadable", exc_info=True)
        return None


def sso_account(accounts: AccountStore, claims: dict) -> tuple[Account | None, str]:
    """The account of a single sign-on identity, or None and why (unverified e-mail, bound to another identity,
    signed in before an admin ended the account's sessions…)."""
    account, why = accounts.for_identity(str(claims.get("iss") or ""), str(claims.get("sub") or ""),
                                         claims.get("email"), claims.get("email_verified"))
    if account is not None:
        after, issued = accounts.sso_after(account.name), sso_issued_at(claims)
        if after > 0 and (issued is None or issued <= after):
            return None, "this sign-in was ended by an admin or by a change to the account; sign in again"
    return account, why


def current_identity(accounts: AccountStore) -> Account | None:
    """The account of this run, re-checked against the accounts on every run; None: nobody."""
    if auth_mode() == "local":
        return local_admin()
    claims = sso_claims()
    if claims is not None:
        account, _ = sso_account(accounts, claims)
        if account is not None and not st.session_state.get("_auth_sso_logged"):
            st.session_state["_auth_sso_logged"] = True
            home_workspace().audit.record(account.name, "auth.sign_in", account.name, via="sso",
                                          email=claims.get("email"), client=client_address())
        return account
    return home_workspace().sessions.resolve(session_cookie(), **presented(_headers()))


def actor_name() -> str:
    """The name audit entries record for this browser session's actions."""
    account = current_identity(home_workspace().accounts)
    return account.name if account else "anonymous"


def sign_out() -> None:
    """End this browser's sign-in: the session behind its cookie (every tab of the browser), or single sign-on."""
    ws = home_workspace()
    account = current_identity(ws.accounts)
    if ws.sessions.end(session_cookie()) and account is not None:
        ws.audit.record(account.name, "auth.sign_out", account.name, client=client_address())
    st.session_state.pop("_auth_sso_logged", None)
    st.query_params.clear()
    if sso_claims() is not None:
        st.logout()


MESSAGES = {
    "failed": "Unknown name or wrong password.",
    "expired": "The sign-in form had expired; sign in again.",
}


def _message(code: str | None) -> str | None:
    if not code:
        return None
    if code.startswith("wait-") and code[5:].isdigit():
        return f"Too many failed sign-ins for this name or from this address. Try again in {int(code[5:])} s."
    return MESSAGES.get(code)


def next_path(page_path: str) -> str:
    """Where the sign-in should lead back to: this page with its query (the view asked for)."""
    query = {k: v for k, v in st.query_params.to_dict().items() if k != web_auth.SIGNIN_PARAM}
    path = "/" if page_path in ("", "home") else f"/{page_path}"  # "/" opens each role's first page
    return path + (f"?{urlencode(query)}" if query else "")


def sign_in_form(next_to: str, xsrf: str | None) -> str:
    """The password form: posts to the sign-in route, which sets the session cookie and sends the browser on."""
    hidden = "".join(f'<input type="hidden" name="{k}" value="{html.escape(v, quote=True)}">'
                     for k, v in web_auth.form_fields(next_to, xsrf).items())
    f = web_auth.FIELDS
    return f"""<style>
.pal-signin {{ display: flex; flex-direction: column; gap: .6rem; max-width: 26rem; }}
.pal-signin label {{ font-size: .875rem; }}
.pal-signin input[type=text], .pal-signin input[type=password] {{ padding: .5rem .75rem; border-radius: .5rem;
  border: 1px solid rgba(49, 51, 63, .25); font-size: 1rem; }}
.pal-signin button {{ align-self: flex-start; padding: .45rem 1rem; border-radius: .5rem; border: none;
  background: #ff4b4b; color: white; font-size: 1rem; cursor: pointer; }}
</style>
<form class="pal-signin" method="post" action="{web_auth.SIGN_IN_PATH}">
<label for="pal-signin-name">Name</label>
<input id="pal-signin-name" type="text" name="{f['name']}" autocomplete="username" required>
<label for="pal-signin-password">Password</label>
<input id="pal-signin-password" type="password" name="{f['password']}" autocomplete="current-password" required>
{hidden}
<button type="submit">Sign in</button>
</form>"""


def render_sign_in(accounts: AccountStore, page_path: str = "") -> None:
    """The only thing a signed-out visitor sees: how to create the first admin, or the sign-in form."""
    st.title("PAL Studio")
    if accounts.count() == 0:
        st.info(f"No accounts exist yet. On the server, create the first admin with `{FIRST_ADMIN}` "
                "(it asks for a password), then sign in here. A single person on their own machine can run "
                "`make run` instead (PAL_AUTH=local, no sign-in).")
        return
    claims = sso_claims()
    if claims is not None:
        _, why = sso_account(accounts, claims)
        email = str(claims.get("email") or claims.get("sub") or "this identity")
        st.error(f"The identity {md_escape(email)} cannot sign in here: {md_escape(why)}. Ask an admin "
                 "(`pal users add NAME --role … --email …`).")
        _audit_refusal(email, why)
        st.button("Sign out", key="auth_sso_logout", on_click=sign_out)
        return
    st.caption("Sign in to continue.")
    if message := _message(st.query_params.get(web_auth.SIGNIN_PARAM)):
        st.error(message)
    if web_auth.mounted():
        xsrf = None
        try:
            xsrf = st.context.cookies.get(XSRF_COOKIE)
        except (AttributeError, RuntimeError):
            log.warning("no XSRF cookie for the sign-in form", exc_info=True)
        st.html(sign_in_form(next_path(page_path), xsrf))
    else:
        st.error("Password sign-in needs the app's sign-in route: start the server with `make serve` "
                 "(`streamlit run serve.py`), not `streamlit run app.py`.")
        log.error("PAL_AUTH=accounts without the sign-in route (pid %s): run serve.py", os.getpid())
    if sso_configured():
        st.button("Sign in with single sign-on", key="auth_sso_login", icon=":material/login:", on_click=st.login)


def _audit_refusal(identity: str, why: str) -> None:
    key = f"_auth_refusal_logged_{identity}"
    if not st.session_state.get(key):
        st.session_state[key] = True
        home_workspace().audit.record(identity, "auth.refused", identity, via="sso", reason=why,
                                      client=client_address())
