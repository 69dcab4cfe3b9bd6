"""A bare Streamlit client over HTTP and the websocket protocol, for attacks a browser would not make.

It does what the browser does — fetch the page (Streamlit's XSRF cookie), post the sign-in form, open
``/_stcore/stream`` with the XSRF token and, to reconnect, a session id in ``Sec-WebSocket-Protocol`` — but any of it
can be forged: another browser's session id, no cookies, a wrong origin. A run's page comes back as the text of
every element it sent.
"""

from __future__ import annotations

import http.cookiejar
import ssl
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

UNVERIFIED = ssl._create_unverified_context()  # the self-signed certificate a test or bench makes


@dataclass
class Visitor:
    """One browser's cookies against one app (``base``: ``http://127.0.0.1:PORT``)."""

    base: str
    jar: http.cookiejar.CookieJar = field(default_factory=http.cookiejar.CookieJar)

    def __post_init__(self) -> None:
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect(),
                                                  urllib.request.HTTPSHandler(context=UNVERIFIED))

    def cookie(self, name: str) -> str | None:
        return next((c.value for c in self.jar if c.name == name), None)

    def open(self, path: str = "/") -> int:
        """Load a page as the browser does: the HTML, then the health check that sets the XSRF cookie."""
        with self.opener.open(self.base + path, timeout=30) as r:
            status = int(r.status)
        with self.opener.open(self.base + "/_stcore/health", timeout=30):
            return status

    def sign_in(self, name: str, password: str, next_path: str = "/", origin: str | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, str]:
        """Post the sign-in form as the page would (after :meth:`open` fetched the XSRF cookie); (status, Location)."""
        data = urllib.parse.urlencode({"pal_name": name, "pal_password": password, "pal_next": next_path,
                                       "pal_xsrf": self.cookie("_streamlit_xsrf") or ""}).encode()
        request = urllib.request.Request(self.base + "/auth/sign-in", data=data, method="POST", headers={
            "Origin": origin or self.base, "Content-Type": "application/x-www-form-urlencoded", **(headers or {})})
        try:
            with self.opener.open(request, timeout=60) as r:
                return int(r.status), r.headers.get("Location", "")
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Location", "")

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def run_page(base: str, page: str, *, cookies: str = "", xsrf: str | None = None, session_id: str | None = None,
             query: str = "", timeout: float = 60.0, origin: str | None = None, host: str | None = None
             ) -> tuple[str, str]:
    """Open a websocket (reconnecting to ``session_id`` when given), run ``page`` once; (session id, page text).
    ``origin`` and ``host`` forge those headers (default: the app's own)."""
    import websocket  # websocket-client
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    url = base.replace("http", "ws", 1) + "/_stcore/stream"
    protocols = ["streamlit", xsrf or " ", session_id or " "]  # positional: a blank entry is "none"
    ws = websocket.create_connection(url, timeout=timeout, subprotocols=protocols,
                                     header=[f"Cookie: {cookies}"] if cookies else [], origin=origin or base,
                                     sslopt={"cert_reqs": ssl.CERT_NONE, "check_hostname": False},
                                     host=host)  # None: the URL's own
    try:
        back = BackMsg()
        back.rerun_script.query_string = query
        back.rerun_script.page_name = page
        ws.send_binary(back.SerializeToString())
        sid, texts = "", []
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(ws.recv())
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                sid = msg.new_session.initialize.session_id
            elif kind == "delta":
                texts.append(str(msg.delta))
            elif kind == "script_finished":
                return sid, "\n".join(texts)
    finally:
        ws.close()
