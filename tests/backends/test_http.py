"""The direct transport (:mod:`backends.llm.http`): kept-alive connections, one closed by the server while idle
replaced without a failed call, proxied endpoints left to the SDK."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from backends.llm import http


def _answer(conn: socket.socket, payload: dict) -> None:
    """Read one request (headers and a Content-Length body) and answer ``payload`` as a kept-alive HTTP/1.1 reply."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        body += conn.recv(65536)
    out = json.dumps(payload).encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(out)).encode() + b"\r\n\r\n" + out)


def test_a_connection_the_server_closed_while_idle_is_replaced_without_failing_the_call():
    """The server answers, keeps nothing and closes the connection without saying so (as servers do with idle
    ones): the next request goes out once more on a new connection and gets its answer."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = []

    def serve() -> None:
        for n in range(2):
            conn, _ = server.accept()
            accepted.append(conn)
            _answer(conn, {"n": n})
            if n == 0:
                conn.close()  # closed while the client keeps it for the next request
        for conn in accepted[1:]:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        pool = http.Pool(f"http://127.0.0.1:{port}/v1", {})
        assert pool.post_json("/chat/completions", {"q": 1}, timeout=10) == {"n": 0}
        assert pool.idle == 1  # kept for the next request
        assert pool.post_json("/chat/completions", {"q": 2}, timeout=10) == {"n": 1}
        assert len(accepted) == 2
    finally:
        thread.join(10)
        server.close()


def test_a_refused_connection_and_an_error_status_are_told_apart():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(http.ConnectFailed):
        http.Pool(f"http://127.0.0.1:{port}/v1", {}).post_json("/chat/completions", {}, timeout=5)


def test_an_endpoint_behind_a_proxy_is_not_reached_directly(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                 "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert http.direct("https://api.example.com/v1")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.lab:3128")
    assert not http.direct("https://api.example.com/v1")
    assert http.direct("http://vllm.lab:8000/v1")  # the proxy is for https only
    monkeypatch.setenv("NO_PROXY", "api.example.com")
    assert http.direct("https://api.example.com/v1")


def _raw_server(replies: list[bytes]):
    """A server answering each request it reads (one connection after another, kept open) with the next raw reply;
    (its port, the connections it accepted, the thread)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        pending = list(replies)
        while pending:
            conn, _ = server.accept()
            accepted.append(conn)
            while pending:
                data = b""
                while b"\r\n\r\n" not in data:
                    got = conn.recv(65536)
                    if not got:
                        break
                    data += got
                if not data:
                    break
                conn.sendall(pending.pop(0))
        server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server.getsockname()[1], accepted, thread


def test_chunked_and_interim_answers_are_read_whole_and_the_connection_kept():
    body = json.dumps({"choices": [{"message": {"content": "hé"}}]}).encode()
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % 10 + body[:10] + b"\r\n"
               + b"%x\r\n" % (len(body) - 10) + body[10:] + b"\r\n0\r\n\r\n")
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    port, accepted, thread = _raw_server([chunked, interim])
    pool = http.Pool(f"http://127.0.0.1:{port}/v1", {})
    assert pool.post_json("/chat/completions", {"q": 1}, timeout=10) == json.loads(body)
    assert pool.post_json("/chat/completions", {"q": 2}, timeout=10) == {}
    assert len(accepted) == 1 and pool.idle == 1  # both on one kept-alive connection
    thread.join(10)


def test_an_error_status_keeps_its_body_and_headers_and_a_closing_answer_is_not_kept():
    error = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 24\r\n\r\n" + b'{"error": "slow down"}  '
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 8\r\n\r\n{\"a\": 1}"
    port, accepted, thread = _raw_server([error, closing])
    pool = http.Pool(f"http://127.0.0.1:{port}/v1", {})
    with pytest.raises(http.StatusError) as e:
        pool.post_json("/chat/completions", {}, timeout=10)
    assert e.value.status == 429 and e.value.headers["retry-after"] == "3" and e.value.json() == {"error": "slow down"}
    assert pool.idle == 1
    assert pool.post_json("/chat/completions", {}, timeout=10) == {"a": 1}
    assert pool.idle == 0  # the server said it closes the connection
    thread.join(10)


def test_an_answer_that_stops_before_its_length_is_dropped_not_read_as_whole():
    port, accepted, thread = _raw_server([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"a\""])

    def close_after_reply() -> None:
        thread.join(10)
        for conn in accepted:
            conn.close()

    threading.Thread(target=close_after_reply, daemon=True).start()
    with pytest.raises(http.Dropped):
        http.Pool(f"http://127.0.0.1:{port}/v1", {}).post_json("/chat/completions", {}, timeout=10)


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's")
def test_an_answer_written_in_two_sends_is_not_held_back_by_delayed_acknowledgements():
    """A server that writes an answer's headers, then its body, without TCP_NODELAY (as Python's http.server does)
    sends the body only once the headers are acknowledged; a kept-alive client that delays its acknowledgements made
    each such call take about 40 ms longer. Answers come back in well under that now, call after call."""
    import statistics
    import time

    from testkit.fault_server import serving
    from testkit.slot_server import SlotServer

    server = SlotServer(latency=0.0, slots=2)
    with serving(server.httpd):
        pool = http.Pool(server.base_url, {})
        body = {"model": "m", "messages": [{"role": "user", "content": "what should I cook tonight? " * 40}]}
        took = []
        for _ in range(25):
            started = time.perf_counter()
            assert pool.post_json("/chat/completions", body, 30)["choices"]
            took.append(time.perf_counter() - started)
        assert pool.idle == 1  # one kept-alive connection served them all
        for _ in range(3):
            started = time.perf_counter()
            assert list(pool.post_events("/chat/completions", {**body, "stream": True}, 30))
            took.append(time.perf_counter() - started)
    assert statistics.median(took) < 0.02, took
