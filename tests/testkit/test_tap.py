"""The bench's recording proxy (testkit/tap.py) when the app stops reading a streamed answer half-way."""

import http.client
import json
import logging
import threading
import time
from urllib.parse import urlsplit

from testkit.tap import Tap
from testkit.trickle_server import TrickleServer


def test_an_answer_the_app_stops_reading_is_recorded_as_closed_and_the_tap_serves_on(caplog):
    caplog.set_level(logging.INFO, logger="testkit.tap")
    with TrickleServer(tokens=40, rate=100.0).running() as server:
        root = server.base_url.rsplit("/v1", 1)[0]
        tap = Tap(root, poll_s=60)
        threading.Thread(target=tap.httpd.serve_forever, daemon=True).start()
        try:
            port = urlsplit(tap.root).port
            body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("POST", "/v1/chat/completions", body=body, headers={"content-type": "application/json"})
            resp = conn.getresponse()
            assert resp.readline().startswith(b"data: ")  # one chunk, then the app hangs up
            resp.close()  # the connection was the response's to close ("connection: close")
            conn.close()
            deadline = time.time() + 10
            while not tap.records and time.time() < deadline:
                time.sleep(0.05)
            assert tap.records and tap.records[0]["client_closed"] is True
            assert "closed a streamed answer early" in caplog.text
            whole = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # the next call goes through whole
            whole.request("POST", "/v1/chat/completions", body=body, headers={"content-type": "application/json"})
            text = whole.getresponse().read().decode()
            assert text.rstrip().endswith("data: [DONE]") and len(tap.records) == 2
            assert "client_closed" not in tap.records[1]
        finally:
            tap.httpd.shutdown()
