"""JSON requests and server-sent event streams over one keep-alive connection pool per endpoint (stdlib
:mod:`http.client`).

A protocol run makes hundreds of thousands of calls, and the OpenAI SDK's stack (its request options, httpx's
request and URL models, httpcore's pool, h11's header validation) cost milliseconds of the app's CPU for each —
a quarter of all it spent per call. A chat completion needs little of it: a POST of a JSON body, a JSON answer or a
stream of ``data:`` lines, kept-alive connections and a timeout between reads. :class:`Pool` does that and nothing
else; :mod:`backends.llm.openai_compat` maps its failures to the typed errors of :mod:`backends.llm.errors`.
A JSON answer (every call nobody watches) is read by :func:`_exchange` itself: :mod:`http.client` parses each
answer's headers with the :mod:`email` package, about half of the transport's CPU per call.

Timeouts are those of the SDK's client: at most ``connect`` seconds to connect, and ``timeout`` seconds for each
read (the whole answer of a short call, or the gap between two chunks of a stream). A kept-alive connection the
server closed while it was idle is noticed when the request is sent or its answer never starts: the request is
sent once more on a new connection. A stream stopped early closes its connection, so the server stops decoding;
one read to its end (``[DONE]`` and the chunked body's end) goes back to the pool.

Once a request is sent, the connection acknowledges what comes back at once (``TCP_QUICKACK``, Linux): a server
that writes an answer's headers and its body in two sends without ``TCP_NODELAY`` (Python's :mod:`http.server`, so
the fake endpoints; any server written so) holds the body back until the headers are acknowledged (Nagle's
algorithm), and a kept-alive connection that has just sent delays its acknowledgements by up to 40 ms — which every
call, and the endpoint's slot it held, waited on.

HTTPS uses the CA bundle the SDK used (``certifi``) when it is installed, else the system's. An endpoint reached
through a proxy (``HTTPS_PROXY`` and friends) is not served here: :func:`direct` says so, and the provider uses the
SDK, which honours the proxy settings.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import threading
import urllib.request
from collections import deque
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

MAX_IDLE = 64  # idle connections kept per endpoint (more are closed when they come back)
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


class TransportError(Exception):
    """A request that got no usable answer; ``kind`` says why (see the subclasses)."""


class ConnectFailed(TransportError):
    """No connection could be opened (refused, unknown host, TLS failure)."""


class Timeout(TransportError):
    """Connecting or a read took longer than its limit."""


class Dropped(TransportError):
    """The connection broke before the answer was whole."""


class StatusError(TransportError):
    """The endpoint answered with an HTTP error status."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        super().__init__(f"HTTP {status}")
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class Unreadable(TransportError):
    """The answer was not JSON (or a stream line not a JSON event)."""


def direct(base_url: str) -> bool:
    """Whether ``base_url`` is reached without a proxy (the environment's proxy settings do not apply to it)."""
    parts = urlsplit(base_url)
    proxies = urllib.request.getproxies()
    if parts.scheme not in proxies and "all" not in proxies:
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname or ""))


_CONTEXT: ssl.SSLContext | None = None
_CONTEXT_LOCK = threading.Lock()


def _ssl_context() -> ssl.SSLContext:
    """The process's one TLS context (building one reads the CA bundle: tens of milliseconds)."""
    global _CONTEXT
    with _CONTEXT_LOCK:
        if _CONTEXT is None:
            try:
                import certifi

                _CONTEXT = ssl.create_default_context(cafile=certifi.where())
            except ImportError:
                log.info("certifi is not installed: HTTPS endpoints are checked against the system's CA bundle")
                _CONTEXT = ssl.create_default_context()
        return _CONTEXT


class Pool:
    """Kept-alive connections to one endpoint, shared by every thread of the process."""

    def __init__(self, base_url: str, headers: dict[str, str]):
        parts = urlsplit(base_url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.headers = {"Content-Type": "application/json", "User-Agent": "pal-studio", **headers}
        host = f"[{self.host}]" if ":" in self.host else self.host
        host += "" if self.port == (443 if self.https else 80) else f":{self.port}"
        lines = {"Host": host, "Accept-Encoding": "identity", **self.headers, "Accept": "application/json"}
        self._json_head = "".join(f"{k}: {v}\r\n" for k, v in lines.items())  # :meth:`post_json`'s headers
        self._idle: deque[http.client.HTTPConnection] = deque()
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- connections

    def _connect(self, connect_s: float) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self.https:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=connect_s, context=_ssl_context())
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=connect_s)
        try:
            conn.connect()
        except TimeoutError as e:
            conn.close()
            raise Timeout(f"connecting took over {connect_s:.0f} s") from e
        except OSError as e:  # refused, unreachable, unknown host, TLS handshake
            conn.close()
            raise ConnectFailed(type(e).__name__) from e
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _take(self) -> http.client.HTTPConnection | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    @property
    def idle(self) -> int:
        """Connections kept open for the next request (tests)."""
        return len(self._idle)

    def _send(self, path: str, body: bytes, timeout: float, accept: str) -> tuple[http.client.HTTPConnection,
                                                                                   http.client.HTTPResponse]:
        """The connection and the started answer of one POST; a kept-alive connection the server closed meanwhile
        is replaced once."""
        headers = {**self.headers, "Accept": accept}
        for attempt in (0, 1):
            conn = self._take()
            reused = conn is not None
            if conn is None:
                conn = self._connect(min(10.0, timeout))
            conn.sock.settimeout(timeout)
            try:
                conn.request("POST", self.prefix + path, body, headers)
                _ack_at_once(conn.sock)
                return conn, conn.getresponse()
            except TimeoutError as e:
                conn.close()
                raise Timeout(f"no answer within {timeout:.0f} s") from e
            except (http.client.HTTPException, OSError) as e:
                conn.close()
                if reused and attempt == 0:
                    log.debug("%s:%s: a kept-alive connection was closed (%s); sending on a new one", self.host,
                              self.port, type(e).__name__)
                    continue
                raise Dropped(type(e).__name__) from e
        raise AssertionError("unreachable")  # the loop returns or raises

    def _finish(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """Give a connection whose answer was read to its end back to the pool (or close it)."""
        if resp.isclosed() and not resp.will_close:
            self._give(conn)
        else:
            conn.close()

    def _check(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        if resp.status < 400:
            return
        try:
            body = resp.read()
        except (http.client.HTTPException, OSError) as e:
            log.debug("%s:%s: the body of an HTTP %d could not be read (%s)", self.host, self.port, resp.status, e)
            body = b""
        self._finish(conn, resp)
        raise StatusError(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)

    # ---------------------------------------------------------------- requests

    def post_json(self, path: str, payload: dict[str, Any], timeout: float) -> Any:
        """POST ``payload`` and return the JSON answer; ``timeout``: seconds for each read. A kept-alive connection
        the server closed meanwhile (nothing sent back before the answer began) is replaced once, as in :meth:`_send`."""
        body = json.dumps(payload).encode()
        request = (f"POST {self.prefix}{path} HTTP/1.1\r\n{self._json_head}Content-Length: {len(body)}\r\n\r\n"
                   ).encode("latin-1") + body
        for attempt in (0, 1):
            conn = self._take()
            reused = conn is not None
            if conn is None:
                conn = self._connect(min(10.0, timeout))
            try:
                status, headers, data, keep = _exchange(conn, request, timeout)
            except TimeoutError as e:
                conn.close()
                raise Timeout(f"no answer within {timeout:.0f} s") from e
            except _NotBegun as e:
                conn.close()
                if reused and attempt == 0:
                    log.debug("%s:%s: a kept-alive connection was closed (%s); sending on a new one", self.host,
                              self.port, e)
                    continue
                raise Dropped(str(e)) from e
            except (http.client.HTTPException, OSError, ValueError) as e:
                conn.close()
                raise Dropped(type(e).__name__) from e
            if keep:
                self._give(conn)
            else:
                conn.close()
            if status >= 400:
                raise StatusError(status, headers, data)
            try:
                return json.loads(data)
            except ValueError as e:
                raise Unreadable(type(e).__name__) from e
        raise AssertionError("unreachable")  # the loop returns or raises

    def post_events(self, path: str, payload: dict[str, Any], idle: float) -> Iterator[Any]:
        """POST ``payload`` and yield the JSON of each server-sent event until ``[DONE]`` or the body's end;
        ``idle``: seconds allowed between two reads. Closing the iterator early closes the connection."""
        conn, resp = self._send(path, json.dumps(payload).encode(), idle, "text/event-stream")
        self._check(conn, resp)
        whole = False
        try:
            for data in _events(resp, idle):
                if data == "[DONE]":
                    resp.read()  # the chunked body's end: the connection can serve the next request
                    whole = True
                    return
                try:
                    yield json.loads(data)
                except ValueError as e:
                    raise Unreadable(type(e).__name__) from e
            whole = True
        finally:
            if whole:
                self._finish(conn, resp)
            else:  # stopped early or broken: the server sees the connection close and stops decoding
                conn.close()


class _NotBegun(OSError):
    """The request could not be sent, or the connection closed before the answer's first byte."""


_MAX_LINE = 65536


def _exchange(conn: http.client.HTTPConnection, request: bytes, timeout: float) -> tuple[int, dict[str, str], bytes,
                                                                                         bool]:
    """Send ``request`` on ``conn``'s socket and read one whole answer: (status, headers with lower-case names,
    body, whether the connection can serve another request). The body is read by its ``Content-Length``, its
    chunks, or to the connection's end; ``timeout`` is each read's limit. :class:`_NotBegun` when nothing of an
    answer came (the caller may send again on a new connection)."""
    sock = conn.sock
    if sock is None:
        raise _NotBegun("the connection is closed")
    sock.settimeout(timeout)
    try:
        sock.sendall(request)
    except TimeoutError:
        raise
    except OSError as e:
        raise _NotBegun(type(e).__name__) from e
    _ack_at_once(sock)
    with sock.makefile("rb") as fp:
        while True:
            try:
                line = fp.readline(_MAX_LINE + 1)
            except TimeoutError:
                raise
            except OSError as e:  # reset by the peer before the answer began
                raise _NotBegun(type(e).__name__) from e
            if not line:
                raise _NotBegun("the server closed the connection before answering")
            version, _, rest = line.decode("latin-1").strip().partition(" ")
            status = int(rest.split(" ", 1)[0])
            headers = _read_headers(fp)
            if status >= 200:  # 1xx (an interim answer such as 100 Continue): the real one follows
                break
        if headers.get("transfer-encoding", "").lower().endswith("chunked"):
            body, whole = _read_chunked(fp), True
        elif "content-length" in headers:
            size = int(headers["content-length"])
            body = fp.read(size)
            if len(body) < size:
                raise http.client.IncompleteRead(body, size - len(body))
            whole = True
        else:
            body, whole = fp.read(), False  # to the connection's end
    connection = headers.get("connection", "").lower()
    keep = whole and ("close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection)
    return status, headers, body, keep


def _ack_at_once(sock: socket.socket) -> None:
    """Acknowledge the answer's segments as they arrive (see the module docstring). Set after each request is sent:
    sending turns delayed acknowledgements back on."""
    if _QUICKACK is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
    except OSError as e:  # a socket type without it: the answer only comes later
        log.debug("TCP_QUICKACK not set on %s (%s)", sock, e)


def _read_headers(fp: Any) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(200):
        line = fp.readline(_MAX_LINE + 1)
        if line in (b"\r\n", b"\n", b""):
            return headers
        name, _, value = line.decode("latin-1").partition(":")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    raise http.client.HTTPException("more than 200 header lines")


def _read_chunked(fp: Any) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int(fp.readline(_MAX_LINE + 1).split(b";", 1)[0].strip() or b"x", 16)
        if size == 0:
            _read_headers(fp)  # trailers, up to the blank line
            return b"".join(parts)
        chunk = fp.read(size)
        if len(chunk) < size or fp.read(2) != b"\r\n":
            raise http.client.IncompleteRead(chunk, size - len(chunk))
        parts.append(chunk)


def _events(resp: http.client.HTTPResponse, idle: float) -> Iterator[str]:
    """The ``data`` of each server-sent event (several ``data:`` lines of one event joined by newlines)."""
    lines: list[str] = []
    while True:
        try:
            raw = resp.readline()
        except TimeoutError as e:
            raise Timeout(f"no data for {idle:.0f} s") from e
        except (http.client.HTTPException, OSError) as e:
            raise Dropped(type(e).__name__) from e
        if not raw:
            if lines:
                yield "\n".join(lines)
            return
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
        elif line.startswith("data:"):
            lines.append(line[5:].lstrip(" "))


_POOLS: dict[tuple[str, str], Pool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(base_url: str, api_key: str | None) -> Pool:
    """The process's one pool for this endpoint and key (every provider, view and job unit shares it)."""
    key = (base_url, api_key or "")
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = Pool(base_url, {"Authorization": f"Bearer {api_key}"} if api_key else {})
        return _POOLS[key]
