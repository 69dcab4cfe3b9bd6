"""Local model servers: one per model in a pool, each model's file and memory checked before it starts; and the real
server behind xllamacpp — start, chat, stream, structured, restart, clean stop — on SmolLM2 (these tests only prove
the path, and SmolLM2 is the fastest), plus one start of the default Qwen2.5-Coder-0.5B."""

import os
import re
import signal
import time
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from backends.config import LocalServerConfig
from backends.llm import local_server as local_server_mod
from backends.llm.local_server import LocalServer, LocalServers
from backends.local_models import CATALOG, DEFAULT_LOCAL_MODEL, SMOLLM2
from backends.model_files import ModelUnavailable
from testkit.workspace import make_workspace
from tests.backends.test_model_files import fake_model, write_gguf

real_model = [pytest.mark.slow, pytest.mark.local_model]
PATH_MODEL = SMOLLM2.name  # what tests that only prove a path serve


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


def test_one_server_per_distinct_model_whatever_name_a_role_uses(tmp_path):
    servers = LocalServers(tmp_path, threads=1)
    cfg = LocalServerConfig()
    default = servers.get(cfg)
    assert default.alias == DEFAULT_LOCAL_MODEL and servers.get(cfg, "qwen2.5-coder-0.5b") is default
    judge = servers.get(cfg, "Qwen2.5-Coder-1.5B-Instruct")
    assert judge is not default and judge.alias == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    assert servers.get(cfg, "SmolLM2-135M-Instruct") is servers.get(cfg, PATH_MODEL) is not default
    assert judge.cfg.threads == 1 and not judge.running()  # created, not started
    status = judge.status()
    assert status["description"] == "Qwen2.5-Coder-1.5B-Instruct · 1.5B · Q4_K_M · 1066 MiB"
    assert status["model"] == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M" and status["threads"] is None
    with pytest.raises(ModelUnavailable, match=r"no local model is called 'gpt-4o': the catalog has "
                                               r"Qwen2.5-Coder-0.5B-Instruct-Q4_K_M, .*\[local\] model_path"):
        servers.get(cfg, "gpt-4o")


def test_roles_get_their_own_models_server_through_the_client(tmp_path):
    ws = make_workspace(tmp_path / "pal", env={"PAL_JUDGE_MODEL": "qwen2.5-coder-1.5b",
                                               "PAL_SYNTHESIZER_MODEL": "SmolLM2-135M-Instruct"})
    client = ws.llm()
    assert client.provider("judge").endpoint == "local:Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    assert client.provider("assistant").server is client.provider("user_simulator").server
    assert client.provider("synthesizer").endpoint == f"local:{PATH_MODEL}"
    assert client.provider("judge").server is not client.provider("assistant").server


def test_a_gguf_by_path_is_served_under_its_file_name(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_MODEL_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tiny-test.Q8_0.gguf"
    write_gguf(path)
    cfg = LocalServerConfig(model_path=str(path))
    server = LocalServers(tmp_path / "logs").get(cfg)
    assert server.alias == "tiny-test.Q8_0" and server.model_path == path
    assert server.prepare().sha256 is None and server.description() == "tiny-test.Q8_0 · GGUF by path · 0 MiB"
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model")
    with pytest.raises(ModelUnavailable, match="notes.gguf is not a GGUF model file"):
        LocalServers(tmp_path / "logs").get(LocalServerConfig(model_path=str(notes))).ensure()


def test_a_missing_part_or_too_little_memory_refuses_the_start_by_name(tmp_path, monkeypatch):
    model, files = fake_model(tmp_path, monkeypatch)
    monkeypatch.setitem(CATALOG, model.name, model)
    server = LocalServers(tmp_path / "logs").get(LocalServerConfig(ctx=4096), "fake-tiny")
    monkeypatch.setattr(local_server_mod, "available_memory", lambda: 50 * 2**20)
    with pytest.raises(ModelUnavailable, match=r"Fake-Tiny-Q8 does not fit in memory: it needs about [\d,]+ MiB .*KV "
                                               r"cache 1 MiB for 4,096 tokens.*, and 50 MiB are available"):
        server.ensure()
    assert not server.running()
    unchecked = LocalServers(tmp_path / "logs").get(LocalServerConfig(ctx=4096, check_memory=False), "fake-tiny")
    assert unchecked.prepare().size == model.size  # the check can be switched off
    files[0].unlink()
    with pytest.raises(ModelUnavailable, match=r"fakemodel-part1 is installed without its file data/part01.bin"):
        server.ensure()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = LocalServer(LocalServerConfig(ctx=2048, parallel=2, threads=1), tmp_path_factory.mktemp("local_server"),
                      PATH_MODEL)
    srv.ensure()
    yield srv
    srv.stop()


def client_for(server, tmp_path):
    client = make_workspace(tmp_path / "pal", env={"PAL_DEFAULT_MODEL": PATH_MODEL}).llm()
    client.provider("assistant").server = server  # share the module's server
    client.provider("judge").server = server
    return client


@pytest.mark.slow
@pytest.mark.local_model
def test_chat_and_stream_through_the_platform(server, tmp_path):
    assert server.healthy()
    client = client_for(server, tmp_path)
    result = client.chat("assistant", [{"role": "user", "content": "Name a colour."}], use_cache=False, max_tokens=20)
    assert result.text.strip() and result.tokens_out > 0 and result.model == "SmolLM2-135M-Instruct-Q4_1"
    chunks = list(client.stream("assistant", [{"role": "user", "content": "Count to three."}], use_cache=False,
                                max_tokens=20))
    assert len(chunks) >= 3 and chunks[-1].tokens_out > 0
    assert "".join(c for c in chunks[:-1]) == chunks[-1].text


@pytest.mark.slow
@pytest.mark.local_model
def test_bounded_structured_call_parses(server, tmp_path):
    client = client_for(server, tmp_path)
    out = client.structured("judge", [{"role": "user", "content": "Describe today's weather in Paris."}], Weather,
                            use_cache=False, max_tokens=80)
    assert out.ok, out
    assert out.value.sky in ("sunny", "cloudy", "rainy")


@pytest.mark.slow
@pytest.mark.local_model
def test_a_structured_call_streams_its_grammar_bound_json(server, tmp_path):
    """The bundled server keeps the schema's grammar on a streamed request, in the schema's field order (a user's
    decision is read from its first field while it streams)."""
    client = client_for(server, tmp_path)
    deltas: list[str] = []
    out = client.structured("judge", [{"role": "user", "content": "Describe today's weather in Paris."}], Weather,
                            use_cache=False, max_tokens=80, on_text=deltas.append)
    assert out.ok, out
    assert len(deltas) >= 3 and "".join(deltas) == out.raw
    first_field = next(iter(Weather.model_fields))
    assert re.match(r'\s*\{\s*"' + first_field + '"', out.raw), out.raw


@pytest.mark.slow
@pytest.mark.local_model
def test_server_restarts_after_dying_and_stops_without_orphans(tmp_path):
    srv = LocalServer(LocalServerConfig(ctx=1024, parallel=1, threads=1), tmp_path, PATH_MODEL)
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


@pytest.mark.slow
@pytest.mark.local_model
def test_a_server_started_from_a_short_lived_thread_outlives_it(tmp_path):
    """An H²Memory stage's fan-out worker starts the server and ends; the server must not die with that thread
    (PR_SET_PDEATHSIG follows the thread that forked the child: every stage used to restart the server)."""
    import threading

    srv = LocalServer(LocalServerConfig(ctx=512, parallel=1, threads=1), tmp_path, PATH_MODEL)
    worker = threading.Thread(target=srv.ensure)
    worker.start()
    worker.join(timeout=60)
    time.sleep(1.0)
    try:
        assert srv.healthy() and srv.restarts == 0
    finally:
        srv.stop()


@pytest.mark.slow
@pytest.mark.local_model
def test_server_dies_with_its_parent_even_when_the_parent_is_killed(tmp_path):
    import subprocess
    import sys

    code = ("from backends.config import LocalServerConfig\n"
            "from backends.llm.local_server import LocalServer\n"
            "import sys, time\n"
            "from pathlib import Path\n"
            "s = LocalServer(LocalServerConfig(ctx=512, parallel=1, threads=1), Path(sys.argv[1]),"
            " 'SmolLM2-135M-Instruct-Q4_1'); s.ensure()\n"
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


@pytest.mark.slow(seconds=15)
@pytest.mark.local_model
def test_the_default_model_starts_verified_and_answers(tmp_path):
    """Qwen2.5-Coder-0.5B as make run serves it: the joined file verified, threads chosen by measurement."""
    srv = LocalServer(LocalServerConfig(ctx=1024, parallel=1), tmp_path)
    try:
        srv.ensure()
        status = srv.status()
        assert status["healthy"] and status["model"] == DEFAULT_LOCAL_MODEL
        assert status["verified"].startswith("sha256 1d9614638d18") and status["threads"] >= 1
        assert status["threads_reason"].startswith(f"auto: {status['threads']} thread")
        client = make_workspace(tmp_path / "pal").llm()
        client.provider("assistant").server = srv
        result = client.chat("assistant", [{"role": "user", "content": "用中文说一个颜色。"}], use_cache=False,
                             max_tokens=8)
        assert result.text.strip() and result.model == DEFAULT_LOCAL_MODEL
    finally:
        srv.stop()
