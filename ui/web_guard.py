"""The server's front door: which Host and Origin may reach the app, and what a connection that is not signed in
may make the app do. ``serve.py`` wraps Streamlit in :class:`OriginGuard` (``st.App(middleware=…)``).

Streamlit accepts a websocket whose Origin names the same *host* on any port (``localhost``, ``127.0.0.1``, the
machine's addresses), and any Host header: a page served on another port of the server (a notebook, a dev server, an
SSH tunnel) could open the app's websocket with its visitor's cookies, and a DNS-rebound name could reach a local
app. The guard, before Streamlit sees a request:

* websocket: the ``Origin`` must be present and be exactly the origin of the ``Host`` (scheme, name *and* port),
  and — when ``PAL_PUBLIC_URL`` names the public origin(s), e.g. the reverse proxy's — one of those; the ``Host``
  must be one of their host:port pairs. In local mode (``PAL_AUTH=local``) the Host must be a loopback name
  (``localhost``, ``127.0.0.1``, ``[::1]``) and the peer a loopback address, so DNS rebinding (Host
  ``evil.example``) reaches nothing;
* HTTP: the same Host rule (``/_stcore/health`` excepted: probes reach the app directly), and
  ``/_stcore/metrics`` is off;
* every rerun a websocket asks for in accounts mode: the widget values it carries reach Streamlit — whose
  callbacks run *before* the page script re-reads who is signed in — only while the connection's session still
  signs someone in (``signed_in``: :func:`ui.access.connection_signed_in`): after a sign-out, a changed role or a removed account,
  or on a connection that reconnected to someone else's Streamlit session id, a click changes nothing and the
  page shows the sign-in.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from review.access import auth_mode

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
LOOPBACK_PEERS = ("127.0.0.1", "::1", "::ffff:127.0.0.1")
HEALTH_SUFFIX = "/_stcore/health"
METRICS_SUFFIX = "/_stcore/metrics"
SIGNED_OUT_WIDGETS = ("auth_sso_login", "auth_sso_logout")  # the only widgets a signed-out page shows

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def normal_origin(url: str) -> str:
    """``scheme://host[:port]`` in lower case (ValueError for anything that is not an http(s) origin)."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or parts.username or parts.password:
        raise ValueError(f"{url!r} is not an http(s) origin")
    parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def _hostname(host: str) -> str | None:
    try:
        parts = urlsplit(f"//{host}")
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        return None
    if parts.username or parts.password or parts.path or parts.query or parts.fragment:
        return None
    return (parts.hostname or "").rstrip(".") or None


class OriginPolicy(BaseModel):
    """Where the app may be reached from: the access mode and the public origins (``PAL_PUBLIC_URL``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    mode: Literal["local", "accounts"]
    public: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OriginPolicy:
        env = os.environ if env is None else env
        raw = env.get("PAL_PUBLIC_URL") or ""
        try:
            public = tuple(normal_origin(u) for u in raw.split(",") if u.strip())
        except ValueError as e:
            raise ValueError(f"PAL_PUBLIC_URL: {e} (give the origin(s) people open, e.g. https://pal.lab.example)"
                             ) from None
        return cls(mode=auth_mode(env), public=public)

    def plain_http_warning(self) -> str | None:
        """What to say at start when accounts are served without TLS: over plain HTTP every port of a host receives
        every cookie of that host, the session cookie included (None: nothing to say)."""
        if self.mode != "accounts" or (self.public and all(o.startswith("https://") for o in self.public)):
            return None
        return ("PAL_AUTH=accounts without an https PAL_PUBLIC_URL: over plain HTTP any server on another port of "
                "this host receives the visitors' session cookies; serve behind TLS and set PAL_PUBLIC_URL "
                "(docs/deployment.md)")

    def host_allowed(self, host: str | None) -> bool:
        """Whether a request naming ``host`` (the Host header, with its port) is for this app."""
        name = _hostname(host or "")
        if name is None:
            return False
        if self.public:
            return host.lower() in {urlsplit(o).netloc for o in self.public}  # type: ignore[union-attr]  # name set
        return name in LOOPBACK_NAMES if self.mode == "local" else True

    def origin_allowed(self, origin: str | None, host: str | None) -> bool:
        """Whether a websocket (or a form post) from ``origin`` to ``host`` comes from this app's own page."""
        if not origin or origin == "null" or not self.host_allowed(host):
            return False
        try:
            normal = normal_origin(origin)
        except ValueError:
            return False
        if urlsplit(normal).netloc != (host or "").lower():
            return False
        return normal in self.public if self.public else True


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _loopback_peer(scope: Scope) -> bool:
    client = scope.get("client") or ("",)
    return str(client[0]) in LOOPBACK_PEERS


def widget_ids(data: bytes) -> list[str] | None:
    """The ids of the widget values a rerun request carries (None: not a rerun with widget values)."""
    from google.protobuf.message import DecodeError
    from streamlit.proto.BackMsg_pb2 import BackMsg

    back = BackMsg()
    try:
        back.ParseFromString(data)
    except DecodeError:
        log.info("a websocket frame that is not a BackMsg (left to Streamlit)", exc_info=True)
        return None
    if back.WhichOneof("type") != "rerun_script" or not back.rerun_script.HasField("widget_states"):
        return None
    return [w.id for w in back.rerun_script.widget_states.widgets]


def signed_out_values(data: bytes) -> bytes:
    """The rerun request without the widget values a signed-out page does not show (no callback of theirs runs)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    back = BackMsg()
    back.ParseFromString(data)
    kept = [w for w in back.rerun_script.widget_states.widgets if w.id.endswith(SIGNED_OUT_WIDGETS)]
    del back.rerun_script.widget_states.widgets[:]
    back.rerun_script.widget_states.widgets.extend(kept)
    return back.SerializeToString()


def _refuse_http(status: int, text: str) -> Callable[[Receive, Send], Awaitable[None]]:
    async def respond(receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": text.encode("utf-8")})

    return respond


class OriginGuard:
    """ASGI middleware in front of Streamlit (see the module docstring)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], *,
                 signed_in: Callable[[Mapping[str, str]], bool], policy: OriginPolicy | None = None):
        """``signed_in``: whether a websocket handshake's headers (lower-case names) still sign someone in
        (``serve.py`` passes :func:`ui.access.connection_signed_in`)."""
        self.app = app
        self.policy = policy or OriginPolicy.from_env()
        self.signed_in = signed_in
        if warning := self.policy.plain_http_warning():
            log.warning(warning)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        path = str(scope.get("path", ""))
        refusal = self._refusal(kind, path, headers, scope)
        if refusal is not None:
            log.warning("refused %s %s: %s (Host %r, Origin %r, peer %r)", kind, path, refusal, headers.get("host"),
                        headers.get("origin"), (scope.get("client") or ("?",))[0])
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                status = 404 if refusal == "metrics are off" else 403
                await _refuse_http(status, f"Refused: {refusal}.")(receive, send)
            return
        if kind == "websocket" and self.policy.mode == "accounts":
            receive = self._only_signed_in_clicks(headers, receive)
        await self.app(scope, receive, send)

    def _refusal(self, kind: str, path: str, headers: Mapping[str, str], scope: Scope) -> str | None:
        if self.policy.mode == "local" and not _loopback_peer(scope):
            return "local mode answers only this machine (PAL_AUTH=local)"
        if kind == "http" and path.endswith(METRICS_SUFFIX):
            return "metrics are off"
        if kind == "http" and path.endswith(HEALTH_SUFFIX):
            return None
        if not self.policy.host_allowed(headers.get("host")):
            return "the Host is not this app's (PAL_PUBLIC_URL, or loopback names in local mode)"
        if kind == "websocket" and not self.policy.origin_allowed(headers.get("origin"), headers.get("host")):
            return "the websocket's Origin is not this app's own page"
        return None

    def _only_signed_in_clicks(self, headers: Mapping[str, str], receive: Receive) -> Receive:
        import anyio.to_thread

        async def guarded() -> Message:
            message = await receive()
            data = message.get("bytes") if message.get("type") == "websocket.receive" else None
            ids = widget_ids(data) if data else None
            if ids and not all(i.endswith(SIGNED_OUT_WIDGETS) for i in ids):
                if not await anyio.to_thread.run_sync(self.signed_in, headers):
                    log.warning("a rerun with widget values from a connection that signs nobody in: values dropped "
                                "(signed out, role changed, account removed, or another's session id)")
                    message = {**message, "bytes": signed_out_values(data)}  # type: ignore[arg-type]  # data set
            return message

        return guarded
