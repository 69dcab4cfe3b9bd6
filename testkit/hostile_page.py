"""A hostile page on another loopback port, for tests and benches of the server's front door: an HTTP server that
serves one page whose script opens the app's websocket the way Streamlit's own page does (XSRF token read from
``document.cookie``, a rerun request sent on open) and counts the frames it reads back, and that records every
``Cookie`` header the visitor's browser sends it (what a server on another port of the app's host receives)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def rerun_request(page: str) -> bytes:
    """The bytes of a BackMsg asking the app to run ``page`` (what Streamlit's page sends first)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    back = BackMsg()
    back.rerun_script.page_name = page
    back.rerun_script.query_string = ""
    return back.SerializeToString()


def riding_page(stream_url: str, page: str) -> str:
    """HTML whose script rides the visitor's session on ``stream_url`` (``ws(s)://host:port/_stcore/stream``); it
    sets ``window.riding`` to ``{state, frames}`` (state: opening, open, closed:<code>, error)."""
    payload = base64.b64encode(rerun_request(page)).decode("ascii")
    return f"""<!doctype html><html><body><p>A page on another port</p><script>
window.riding = {{state: "opening", frames: 0}};
const xsrf = (document.cookie.split("; ").find(c => c.startsWith("_streamlit_xsrf=")) || "=none").split("=")[1];
const ws = new WebSocket({json.dumps(stream_url)}, ["streamlit", xsrf || "none"]);
ws.binaryType = "arraybuffer";
ws.onopen = () => {{ window.riding.state = "open";
  ws.send(Uint8Array.from(atob({json.dumps(payload)}), c => c.charCodeAt(0))); }};
ws.onmessage = () => {{ window.riding.frames += 1; }};
ws.onerror = () => {{ if (window.riding.state === "opening") window.riding.state = "error"; }};
ws.onclose = (e) => {{ window.riding.state = "closed:" + e.code; }};
</script></body></html>"""


@dataclass
class HostilePage:
    url: str
    cookies: list[str] = field(default_factory=list)  # every Cookie header the page's server received


@contextmanager
def hostile_page(stream_url: str, page: str = "audit") -> Iterator[HostilePage]:
    """Serve :func:`riding_page` on a free loopback port; yields its URL and the cookies its server received."""
    html = riding_page(stream_url, page).encode("utf-8")
    seen = HostilePage(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if cookie := self.headers.get("Cookie"):
                seen.cookies.append(cookie)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(html)))
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    seen.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Outside:
    """A server standing for the outside world: every request it receives is kept (none should arrive)."""

    base: str
    requests: list[str] = field(default_factory=list)


@contextmanager
def outside_server() -> Iterator[Outside]:
    """A loopback HTTP server that answers everything with an empty 200 and records each path asked for."""
    seen = Outside(base="")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.requests.append(f"{self.command} {self.path}")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_HEAD = _answer

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    seen.base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def loaders(base: str, tag: str) -> str:
    """Text that would make a browser fetch from ``base`` if it were rendered as markdown or HTML anywhere: an
    image, nested-bracket image and link, raw HTML image, stylesheet and CSS import (each path names ``tag``)."""
    return (f"![{tag}]({base}/{tag}.png) ![a [b] c]({base}/{tag}-nested.png) [x [y] z]({base}/{tag}-link) "
            f'<img src="{base}/{tag}-img.png"> <link rel="stylesheet" href="{base}/{tag}.css"> '
            f"<style>@import url({base}/{tag}-import.css);</style> :material/home: {tag}")
