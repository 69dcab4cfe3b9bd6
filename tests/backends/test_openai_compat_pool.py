"""Providers of one endpoint share one connection pool: every workspace, view and job unit that makes its own
provider reuses the process's kept-alive connections (and its one TLS context) instead of opening its own."""

from __future__ import annotations

import threading

from backends.llm.openai_compat import OpenAICompatProvider
from backends.llm.types import ChatRequest, Message
from testkit.latency_server import LatencyServer


def test_providers_of_one_endpoint_share_one_client_and_its_connections():
    server = LatencyServer(latency=0.0)
    threading.Thread(target=server.httpd.serve_forever, daemon=True).start()
    try:
        providers = [OpenAICompatProvider(server.base_url, None) for _ in range(5)]
        request = ChatRequest(model="m", messages=[Message(role="user", content="hi")], max_tokens=5, timeout=10.0)
        for provider in providers:
            provider.complete(request)
        assert len({id(p._http()) for p in providers}) == 1
        assert len(server.peers) == 1  # one after another: one kept-alive connection for all five
        other_key = OpenAICompatProvider(server.base_url, "another-key")
        assert other_key._http() is not providers[0]._http()  # a key of its own gets a pool of its own
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
