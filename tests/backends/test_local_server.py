"""The real bundled model behind xllamacpp: start, chat, stream, structured, restart, clean stop."""

import os
import signal
import time
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from backends.config import LocalServerConfig
from backends.llm.local_server import LocalServer
from testkit.workspace import make_workspace

pytestmark = [pytest.mark.slow, pytest.mark.local_model]


class Weather(BaseModel):
    city: str = Field(max_length=30)
    sky: Literal["sunny", "cloudy", "rainy"]
    temperature_c: int = Field(ge=-40, le=50)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = LocalServer(LocalServerConfig(ctx=2048, parallel=2), tmp_path_factory.mktemp("local_server"))
    srv.ensure()
    yield srv
    srv.stop()


def client_for(server, tmp_path):
    client = make_workspace(tmp_path / "pal").llm()
    client.provider("assistant").server = server  # share the module's server
    client.provider("judge").server = server
    return client


def test_chat_and_stream_through_the_platform(server, tmp_path):
    assert server.healthy()
    client = client_for(server, tmp_path)
    result = client.chat("assistant", [{"role": "user", "content": "Name a colour."}], use_cache=False, max_tokens=20)
    assert result.text.strip() and result.tokens_out > 0 and result.model == "SmolLM2-135M-Instruct"
    chunks = list(client.stream("assistant", [{"role": "user", "content": "Count to three."}], use_cache=False,
                                max_tokens=20))
    assert len(chunks) >= 3 and chunks[-1].tokens_out > 0
    assert "".join(c for c in chunks[:-1]) == chunks[-1].text


def test_bounded_structured_call_parses(server, tmp_path):
    client = client_for(server, tmp_path)
    out = client.structured("judge", [{"role": "user", "content": "Describe today's weather in Paris."}], Weather,
                            use_cache=False, max_tokens=80)
    assert out.ok, out
    assert out.value.sky in ("sunny", "cloudy", "rainy")


def test_server_restarts_after_dying_and_stops_without_orphans(tmp_path):
    srv = LocalServer(LocalServerConfig(ctx=1024, parallel=1), tmp_path)
    srv.ensure()
    pid = srv.proc.pid
    os.kill(pid, signal.SIGKILL)
    srv.proc.wait(timeout=10)
    assert not srv.running()
    srv.ensure()
    assert srv.healthy() and srv.restarts == 1 and srv.proc.pid != pid
    new_pid = srv.proc.pid
    srv.stop()
    time.sleep(0.2)
    assert not _alive(new_pid)


def test_server_dies_with_its_parent_even_when_the_parent_is_killed(tmp_path):
    import subprocess
    import sys

    code = ("from backends.config import LocalServerConfig\n"
            "from backends.llm.local_server import LocalServer\n"
            "import sys, time\n"
            "from pathlib import Path\n"
            "s = LocalServer(LocalServerConfig(ctx=512, parallel=1), Path(sys.argv[1])); s.ensure()\n"
            "print(s.proc.pid, flush=True); time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.kill()
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)
