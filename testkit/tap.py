"""A recording reverse proxy in front of an OpenAI-compatible server, for benches: what the *server* said about
every chat request, whatever the client under test records.

Every request is passed through unchanged (streams chunk by chunk). For each chat completion the tap keeps when
it started and ended and the server's own counters from the response: ``timings`` (llama.cpp: ``prompt_n``
processed, ``cache_n`` served from the prompt cache, ``predicted_n``, ``prompt_ms``, ``predicted_ms``) or else
``usage`` (``prompt_tokens``, ``prompt_tokens_details.cached_tokens``, ``completion_tokens``). It also polls the
server's ``/slots`` (llama.cpp, :mod:`testkit.slot_server`) for each slot's ``is_processing``.

The tap runs in a process of its own (:meth:`Tap.in_process`); ``GET <root>/_tap/records`` and ``/_tap/slots``
return what it saw (times are ``time.time()``).
"""

from __future__ import annotations

import http.client
import json
import logging
import multiprocessing
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade", "te", "trailer"}


def counters(payload: dict[str, Any]) -> dict[str, Any]:
    """The server's token counters in one response (or stream chunk); {} when it has none."""
    out: dict[str, Any] = {}
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else None
    if usage:
        details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        out.update(prompt_tokens=usage.get("prompt_tokens"), cached_tokens=details.get("cached_tokens"),
                   completion_tokens=usage.get("completion_tokens"))
    timings = payload.get("timings") if isinstance(payload.get("timings"), dict) else None
    if timings:
        out.update(prompt_n=timings.get("prompt_n"), cache_n=timings.get("cache_n"),
                   predicted_n=timings.get("predicted_n"), prompt_ms=timings.get("prompt_ms"),
                   predicted_ms=timings.get("predicted_ms"))
    return out


class Tap:
    def __init__(self, upstream_root: str, poll_s: float = 0.1):
        parts = urlsplit(upstream_root)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.poll_s = poll_s
        self.records: list[dict[str, Any]] = []
        self.slot_samples: list[tuple[float, list[bool]]] = []
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @classmethod
    def in_process(cls, upstream_root: str, poll_s: float = 0.1) -> str:
        """Start a tap in front of ``upstream_root`` in its own process; returns the tap's root URL."""
        parent, child = multiprocessing.Pipe()
        multiprocessing.get_context("fork").Process(target=cls._serve, args=(upstream_root, poll_s, child),
                                                    daemon=True).start()
        return parent.recv()

    @classmethod
    def _serve(cls, upstream_root: str, poll_s: float, conn: Any) -> None:
        tap = cls(upstream_root, poll_s)
        threading.Thread(target=tap.poll_slots, daemon=True).start()
        conn.send(tap.root)
        tap.httpd.serve_forever()

    def poll_slots(self) -> None:
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.host}:{self.port}/slots", timeout=30) as r:
                    slots = json.load(r)
                sample = (time.time(), [bool(s.get("is_processing")) for s in slots])
                with self._lock:
                    self.slot_samples.append(sample)
            except (OSError, ValueError):  # no /slots (or not yet up): no samples
                time.sleep(1.0)
            time.sleep(self.poll_s)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        tap = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/_tap/"):
                    with tap._lock:
                        data = tap.records if self.path == "/_tap/records" else tap.slot_samples
                        payload = json.dumps(data).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self._forward(b"")

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("content-length", 0))))

            def _forward(self, body: bytes) -> None:
                chat = self.path.endswith("/chat/completions")
                started = time.time()
                upstream = http.client.HTTPConnection(tap.host, tap.port, timeout=3600)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                resp = upstream.getresponse()
                stream = "text/event-stream" in (resp.getheader("content-type") or "")
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP:
                        self.send_header(k, v)
                seen: dict[str, Any] = {}
                if stream:
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    while line := resp.readline():
                        if not self._relay(line):
                            seen["client_closed"] = True  # the app stopped reading: the server stops with it
                            break
                        if line.startswith(b"data: {"):
                            try:
                                seen.update({k: v for k, v in counters(json.loads(line[6:])).items() if v is not None})
                            except ValueError:
                                pass
                else:
                    data = resp.read()
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    if chat and resp.status == 200:
                        try:
                            seen = counters(json.loads(data))
                        except ValueError:
                            seen = {}
                upstream.close()
                if chat:
                    with tap._lock:
                        tap.records.append({"start": started, "end": time.time(), "status": resp.status,
                                            "stream": stream, **seen})

            def _relay(self, line: bytes) -> bool:
                """Pass one streamed line to the app; False once the app has closed its end (it stopped reading a
                stream, as a cancelled or timed-out call does), which is the app's choice, not a fault of the tap."""
                try:
                    self.wfile.write(line)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError) as e:
                    log.info("tap: the app closed a streamed answer early (%s)", e)
                    return False
                return True

        return Handler
