"""The sign-in route on the app's own origin: ``POST /auth/sign-in`` checks a name and password and answers with
the session cookie and a redirect to the page that was asked for.

Why a route: a Streamlit script talks to the browser over a websocket and cannot set a cookie, and a cookie
JavaScript could set would not be ``HttpOnly``. Streamlit 1.67 serves apps with Starlette and lets an ``st.App``
add routes on the same origin (``serve.py`` mounts these), so the sign-in form (:func:`ui.access.render_sign_in`,
a plain HTML form) posts here and the browser gets a real ``Set-Cookie``: ``HttpOnly``, ``SameSite=Lax``,
``Secure`` when the visitor came over TLS (directly, or through a trusted proxy's ``X-Forwarded-Proto``). Pages read
the cookie their own websocket connection brought (``st.context.cookies``) on every run
(:func:`ui.access.current_identity`), so reloads, new tabs and deep links stay signed in, and identity never rests on
Streamlit's session id. Over TLS the cookie is ``__Host-pal_session`` (Secure, path ``/``, no domain); the session is
bound to the page's token (:func:`page_token`, the XSRF token the form carried, which the page's websocket presents
again) and to the origin the form came from.

A sign-in is checked in this order, each refusal redirecting back with ``?signin=<why>``: the request comes from
this origin (``Origin`` or ``Referer`` = ``Host``, and one of ``PAL_PUBLIC_URL`` when set: :mod:`ui.web_guard`);
Streamlit's XSRF token (double submit: the form's field against the ``_streamlit_xsrf`` cookie) when XSRF protection
is on; the throttle, per name and per client address (:mod:`review.throttle`, :mod:`review.clients`), which counts
the attempt *before* the password is checked, so a burst of parallel guesses counts every one; the password. A
failed sign-in is logged and audited (``auth.sign_in_failed``) with the address and the name tried. The answer never says whether the name exists.
After a success the browser is sent to the page asked for — a path on this origin the role may open — else to ``/``
(the role's first page).
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from review.access import auth_mode, may_open
from review.clients import client_address, over_tls
from review.sessions import COOKIE, TLS_COOKIE

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from studio.workspace import Workspace

log = logging.getLogger(__name__)

SIGN_IN_PATH = "/auth/sign-in"
MAX_FORM_BYTES = 16 * 1024
FIELDS = {"name": "pal_name", "password": "pal_password", "next": "pal_next", "xsrf": "pal_xsrf"}
SIGNIN_PARAM = "signin"  # the query parameter a refusal comes back with (read by ui.access)
_mounted = False


def mounted() -> bool:
    """Whether this process serves the sign-in route (``streamlit run serve.py``)."""
    return _mounted


@dataclass
class Attempt:
    """What came with a sign-in request (the parts :func:`sign_in` reads)."""

    form: dict[str, str]
    peer: str | None
    scheme: str
    host: str | None
    origin: str | None
    referer: str | None
    forwarded_for: str | None
    forwarded_proto: str | None
    user_agent: str | None
    xsrf_cookie: str | None


@dataclass
class Outcome:
    location: str
    cookie: str | None = None  # the new session's cookie value (None: refused)
    secure: bool = False
    max_age: int = 0
    status: int = 303


def safe_next(raw: str | None) -> str:
    """A path on this origin to go to after signing in (anything else — another host, a scheme, ``//``, a
    backslash, a control character — is ``/``)."""
    raw = (raw or "").strip()
    if not raw.startswith("/") or raw.startswith("//") or "\\" in raw or any(ord(c) < 32 for c in raw):
        return "/"
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc:
        return "/"
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != SIGNIN_PARAM]
    return urlunsplit(("", "", parts.path or "/", urlencode(query), ""))


def with_param(location: str, value: str) -> str:
    parts = urlsplit(location)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != SIGNIN_PARAM]
    return urlunsplit(("", "", parts.path or "/", urlencode([*query, (SIGNIN_PARAM, value)]), ""))


def landing(location: str, role: str) -> str:
    """``location`` when the role may open its page, else ``/`` (where the role's first page opens)."""
    page = urlsplit(location).path.strip("/").split("/")[0]
    return location if not page or may_open(role, page) else "/"


def source_origin(attempt: Attempt) -> str | None:
    """The origin the form was posted from: ``Origin``, else the scheme and host of ``Referer``."""
    if attempt.origin:
        return attempt.origin
    if attempt.referer:
        parts = urlsplit(attempt.referer)
        return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None
    return None


def same_origin(attempt: Attempt) -> bool:
    from ui.web_guard import OriginPolicy

    return OriginPolicy.from_env().origin_allowed(source_origin(attempt), attempt.host)


def page_token(xsrf: str | None) -> str | None:
    """The digest a session is bound to: SHA-256 of the token inside Streamlit's (masked) XSRF token string — what
    the sign-in form posts and the page's websocket presents again; None for a missing or malformed one."""
    from streamlit.web.server.starlette.starlette_app_utils import decode_xsrf_token_string

    raw, _ = decode_xsrf_token_string(xsrf or "")
    return hashlib.sha256(raw).hexdigest() if raw else None


def xsrf_valid(token: str | None, cookie: str | None) -> bool:
    from streamlit.web.server.starlette.starlette_app_utils import validate_xsrf_token

    try:
        return validate_xsrf_token(token, cookie)
    except (ValueError, TypeError):
        log.info("malformed XSRF token on a sign-in", exc_info=True)
        return False


def sign_in(ws: Workspace, attempt: Attempt, *, xsrf_on: bool) -> Outcome:
    """Check one sign-in (see the module docstring); never raises for what a visitor sends."""
    back = safe_next(attempt.form.get(FIELDS["next"]))
    if not same_origin(attempt) or (xsrf_on and not xsrf_valid(attempt.form.get(FIELDS["xsrf"]), attempt.xsrf_cookie)):
        log.warning("sign-in refused: not from this origin or without a valid XSRF token (origin %r, host %r)",
                    attempt.origin or attempt.referer, attempt.host)
        return Outcome(with_param(back, "expired"))
    client = client_address(attempt.peer, attempt.forwarded_for)
    name = attempt.form.get(FIELDS["name"], "")[:200]
    password = attempt.form.get(FIELDS["password"], "")[:4096]
    throttle = ws.sign_in_throttle
    wait = throttle.begin(name, client)  # counted now, before the password is checked
    if wait > 0:
        return Outcome(with_param(back, f"wait-{math.ceil(wait)}"))
    account = ws.accounts.verify(name, password)
    if account is None:
        throttle.confirm_failed(name, client)
        log.warning("failed sign-in as %r from %s", name[:64], client)
        ws.audit.record("anonymous", "auth.sign_in_failed", name[:64], client=client,
                        user_agent=(attempt.user_agent or "")[:200] or None)
        return Outcome(with_param(back, "failed"))
    throttle.succeeded(name, client, begun=True)
    cookie = ws.sessions.issue(account.name, client=client, user_agent=attempt.user_agent,
                               page=page_token(attempt.form.get(FIELDS["xsrf"])) if xsrf_on else None,
                               origin=source_origin(attempt))
    ws.sessions.purge()
    ws.audit.record(account.name, "auth.sign_in", account.name, via="password", client=client)
    secure = (over_tls(attempt.scheme, attempt.peer, attempt.forwarded_proto)
              or (source_origin(attempt) or "").lower().startswith("https://"))  # the page is https: its cookie too
    return Outcome(landing(back, account.role), cookie=cookie, secure=secure,
                   max_age=int(ws.sessions.policy.absolute_s))


async def _form(request: Request) -> dict[str, str] | None:
    """The url-encoded form, read up to :data:`MAX_FORM_BYTES` (None: too large)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return None
    return dict(pairs)


def attempt_of(request: Request, form: dict[str, str]) -> Attempt:
    from streamlit.web.server.starlette.starlette_server_config import XSRF_COOKIE_NAME

    h = request.headers
    return Attempt(form=form, peer=request.client.host if request.client else None, scheme=request.url.scheme,
                   host=h.get("host"), origin=h.get("origin"), referer=h.get("referer"),
                   forwarded_for=h.get("x-forwarded-for"), forwarded_proto=h.get("x-forwarded-proto"),
                   user_agent=h.get("user-agent"), xsrf_cookie=request.cookies.get(XSRF_COOKIE_NAME))


def respond(outcome: Outcome) -> Response:
    from starlette.responses import RedirectResponse

    response = RedirectResponse(outcome.location, status_code=outcome.status)
    response.headers["Cache-Control"] = "no-store"
    if outcome.cookie is not None:
        response.set_cookie(TLS_COOKIE if outcome.secure else COOKIE, outcome.cookie, max_age=outcome.max_age,
                            path="/", secure=outcome.secure, httponly=True, samesite="lax")
    return response


async def _sign_in_endpoint(request: Request) -> Response:
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import PlainTextResponse
    from streamlit.web.server.server_util import is_xsrf_enabled

    if auth_mode() != "accounts":
        return PlainTextResponse("Sign-in is off (PAL_AUTH=local).", status_code=404)
    form = await _form(request)
    if form is None:
        return PlainTextResponse("The sign-in form is too large or not a form.", status_code=400)
    from ui.platform_state import home_workspace

    attempt = attempt_of(request, form)
    outcome = await run_in_threadpool(sign_in, home_workspace(), attempt, xsrf_on=is_xsrf_enabled())
    return respond(outcome)


def routes() -> list[Route]:
    """The routes ``serve.py`` mounts (and marks this process as serving them)."""
    from starlette.routing import Route

    global _mounted
    _mounted = True
    return [Route(SIGN_IN_PATH, _sign_in_endpoint, methods=["POST"])]


def form_fields(next_path: str, xsrf: str | None) -> dict[str, Any]:
    """The hidden values of the sign-in form."""
    return {FIELDS["next"]: safe_next(next_path), FIELDS["xsrf"]: xsrf or ""}


def without_uvicorn_proxy_headers() -> None:
    """Keep the TCP peer as the request's client. uvicorn wraps the app it loads in ``ProxyHeadersMiddleware``, which
    (``FORWARDED_ALLOW_IPS`` defaults to 127.0.0.1) replaces a loopback peer by the ``X-Forwarded-For`` it sent — so
    anyone on the server itself could name any address and escape the address throttle. ``serve.py`` is imported by
    uvicorn's ``Config.load`` before that wrapping, too late for the environment variable (read in ``Config()``), so
    the middleware uvicorn would add is replaced by the app itself; the address is decided by
    :func:`review.clients.client_address` (``tests/e2e/test_session_takeover.py`` checks it on the real server)."""
    import uvicorn.config

    uvicorn.config.ProxyHeadersMiddleware = _peer_kept  # type: ignore[assignment,misc]  # same call shape, no rewrite
    log.info("uvicorn's X-Forwarded-For rewriting is off: the client address comes from review.clients")


def _peer_kept(app: Any, trusted_hosts: Any = None) -> Any:
    return app
