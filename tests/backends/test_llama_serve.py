"""The bundled server's child process exits at once on SIGTERM, even in the middle of a generation (it used to
wait for the generation with the interpreter held, so a busy server outlived a killed parent). About 10 s."""

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from backends.llm.local_server import free_port
from backends.local_models import find_model
from backends.model_files import prepare_model
from tests.conftest import PATH_MODEL, ROOT

pytestmark = [pytest.mark.slow(seconds=10), pytest.mark.local_model]


def test_sigterm_during_a_generation_ends_the_server_at_once():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "backends.llama_serve", "--model", prepare_model(find_model(PATH_MODEL)).path,
                             "--port", str(port), "--ctx", "1024", "--parallel", "1", "--threads", "1"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        body = json.dumps({"messages": [{"role": "user", "content": "Tell a long story."}], "max_tokens": 4000,
                           "ignore_eos": True}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"content-type": "application/json"})
        threading.Thread(target=lambda: _swallow(request), daemon=True).start()
        time.sleep(2)  # generating now
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def _swallow(request) -> None:
    try:
        urllib.request.urlopen(request, timeout=60).read()
    except OSError:
        pass  # the server went away mid-answer: expected
