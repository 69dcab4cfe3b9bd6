"""The context-window probe: the key never follows a redirect to another server, URL credentials never reach the log
(audit findings 12 and 13)."""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from backends.llm.discovery import probe_window
from testkit.browser import free_port
from testkit.fault_server import serving

KEY = "sk-secret-0123456789"


def _server(answer):
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            seen.append({k.lower(): v for k, v in self.headers.items()})
            status, headers, body = answer(self.path)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

    return ThreadingHTTPServer(("127.0.0.1", free_port()), Handler), seen


def test_the_key_does_not_follow_a_redirect_to_another_server():
    other, other_seen = _server(lambda path: (200, {"content-type": "application/json"},
                                              json.dumps({"data": [{"id": "m", "max_model_len": 8192}]}).encode()))
    port = other.server_address[1]
    first, first_seen = _server(lambda path: (302, {"location": f"http://127.0.0.1:{port}{path}"}, b""))
    with serving(other), serving(first):
        window, source = probe_window(f"http://127.0.0.1:{first.server_address[1]}/v1", "m", api_key=KEY)
    assert (window, source) == (8192, "endpoint /v1/models")
    assert first_seen[0]["authorization"] == f"Bearer {KEY}"
    assert other_seen and all("authorization" not in h for h in other_seen)


def test_credentials_in_a_base_url_are_not_logged(caplog):
    caplog.set_level(logging.DEBUG, logger="backends.llm.discovery")
    closed = free_port()
    window, _ = probe_window(f"http://lab-user:hunter2-password@127.0.0.1:{closed}/v1", "m", timeout=1)
    assert window is None
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert caplog.records and "hunter2" not in logged and "lab-user" not in logged
