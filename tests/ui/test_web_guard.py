"""The front door (:mod:`ui.web_guard`): which Host and Origin reach the app, and which widget values reach their
callbacks — at the ASGI level, with a recording app behind it."""

from __future__ import annotations

import asyncio

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg

from ui.web_guard import OriginGuard, OriginPolicy, signed_out_values, widget_ids

LOCAL = OriginPolicy(mode="local")
LAB = OriginPolicy(mode="accounts", public=("https://pal.lab.example",))
OPEN = OriginPolicy(mode="accounts")


@pytest.mark.parametrize(("policy", "origin", "host", "ok"), [
    (LOCAL, "http://127.0.0.1:8501", "127.0.0.1:8501", True),
    (LOCAL, "http://localhost:8501", "localhost:8501", True),
    (LOCAL, "http://[::1]:8501", "[::1]:8501", True),
    (LOCAL, "http://127.0.0.1:8793", "127.0.0.1:8501", False),  # a page on another port
    (LOCAL, "http://evil.example:8501", "evil.example:8501", False),  # DNS rebinding
    (LOCAL, None, "127.0.0.1:8501", False),
    (LOCAL, "null", "127.0.0.1:8501", False),
    (OPEN, "https://pal.lab.example", "pal.lab.example", True),
    (OPEN, "https://pal.lab.example:8443", "pal.lab.example", False),
    (OPEN, "http://localhost:8501", "127.0.0.1:8501", False),  # Streamlit itself accepts this one
    (LAB, "https://pal.lab.example", "pal.lab.example", True),
    (LAB, "http://pal.lab.example", "pal.lab.example", False),  # not the public scheme
    (LAB, "https://127.0.0.1:8501", "127.0.0.1:8501", False),
    (LAB, "https://pal.lab.example", "pal.lab.example@evil.example", False),
])
def test_a_websocket_comes_only_from_the_apps_own_origin(policy, origin, host, ok):
    assert policy.origin_allowed(origin, host) is ok


def test_pal_public_url_is_checked_when_read():
    assert OriginPolicy.from_env({"PAL_AUTH": "accounts", "PAL_PUBLIC_URL": "https://A.example/, https://b.example:8443"}
                                 ).public == ("https://a.example", "https://b.example:8443")
    with pytest.raises(ValueError, match="PAL_PUBLIC_URL"):
        OriginPolicy.from_env({"PAL_PUBLIC_URL": "pal.lab.example"})


def test_accounts_without_tls_are_warned_about_at_start():
    assert OPEN.plain_http_warning() and "TLS" in OPEN.plain_http_warning()
    assert OriginPolicy(mode="accounts", public=("http://pal.lab.example",)).plain_http_warning()
    assert LAB.plain_http_warning() is None and LOCAL.plain_http_warning() is None


def _rerun(*ids: str) -> bytes:
    back = BackMsg()
    back.rerun_script.page_name = "review"
    for i in ids:
        w = back.rerun_script.widget_states.widgets.add()
        w.id, w.trigger_value = i, True
    return back.SerializeToString()


class Recorder:
    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.called = False

    async def __call__(self, scope, receive, send) -> None:
        self.called = True
        if scope["type"] == "websocket":
            while (message := await receive())["type"] == "websocket.receive":
                self.frames.append(message["bytes"])
        else:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})


def _serve(policy, scope_type, path, headers, frames=(), peer="127.0.0.1", signed_in=True):
    app = Recorder()
    guard = OriginGuard(app, policy=policy, signed_in=lambda h: signed_in)
    sent: list[dict] = []
    inbox = [*({"type": "websocket.receive", "bytes": f} for f in frames), {"type": "websocket.disconnect"}]

    async def receive():
        return inbox.pop(0)

    async def send(message):
        sent.append(message)

    scope = {"type": scope_type, "path": path, "client": (peer, 50000),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(guard(scope, receive, send))
    return app, sent


def test_the_guard_refuses_before_streamlit_sees_the_request():
    app, sent = _serve(LOCAL, "websocket", "/_stcore/stream",
                       {"Host": "evil.example:8501", "Origin": "http://evil.example:8501"})
    assert not app.called and sent == [{"type": "websocket.close", "code": 1008}]
    app, sent = _serve(LOCAL, "http", "/", {"Host": "evil.example:8501"})
    assert not app.called and sent[0]["status"] == 403
    app, sent = _serve(LOCAL, "http", "/", {"Host": "127.0.0.1:8501"}, peer="192.0.2.9")  # local mode: this machine
    assert not app.called and sent[0]["status"] == 403
    app, sent = _serve(OPEN, "http", "/_stcore/metrics", {"Host": "pal.lab.example"})
    assert not app.called and sent[0]["status"] == 404
    app, _ = _serve(LAB, "http", "/_stcore/health", {"Host": "127.0.0.1:8501"})  # probes reach the app directly
    assert app.called
    app, _ = _serve(LAB, "http", "/review", {"Host": "pal.lab.example"})
    assert app.called


def test_widget_values_reach_callbacks_only_while_the_connection_signs_someone_in():
    headers = {"Host": "pal.lab.example", "Origin": "https://pal.lab.example"}
    click = _rerun("$$ID-abc-review_logs_3")
    app, _ = _serve(LAB, "websocket", "/_stcore/stream", headers, frames=[click], signed_in=True)
    assert app.frames == [click]
    app, _ = _serve(LAB, "websocket", "/_stcore/stream", headers, frames=[click], signed_in=False)
    assert app.frames and widget_ids(app.frames[0]) == []  # the rerun still runs: the page shows the sign-in
    sso = _rerun("$$ID-def-auth_sso_login")
    app, _ = _serve(LAB, "websocket", "/_stcore/stream", headers, frames=[sso], signed_in=False)
    assert app.frames == [sso]  # the sign-in page's own button works signed out
    app, _ = _serve(LOCAL, "websocket", "/_stcore/stream",
                    {"Host": "127.0.0.1:8501", "Origin": "http://127.0.0.1:8501"}, frames=[click], signed_in=False)
    assert app.frames == [click]  # local mode: one person, nobody to sign out


def test_signed_out_values_keep_only_the_sign_in_pages_widgets():
    data = _rerun("$$ID-1-review_logs_3", "$$ID-2-auth_sso_logout")
    assert widget_ids(signed_out_values(data)) == ["$$ID-2-auth_sso_logout"]
    assert widget_ids(b"\xff\x00not a message") is None
