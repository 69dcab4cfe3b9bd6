"""Figures for the bundled model server's thread count (issue 13: why the test workers run one-thread servers).

For 1 and 2 llama.cpp threads, on a quiet machine and beside one busy process (what the other test worker is):
prompt processing (a ≈1,900-token prompt) and decoding (300 tokens, plain and under a JSON schema), in tokens/s
by the server's own usage counts. Two threads that wait for each other on a shared core decode slower than one.

Run: ``.venv/bin/python bench/local_threads.py`` (about three minutes on 2 cores; nothing is written but logs
in a temporary folder).
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.config import LocalServerConfig  # noqa: E402
from backends.llm.local_server import LocalServer  # noqa: E402

LONG = " ".join(f"On day {i} I walked to the shop and bought bread, milk and {i} apples for my family." for i in range(80))
SCHEMA = {"type": "object", "required": ["turns"], "properties": {"turns": {"type": "array", "items": {
    "type": "object", "required": ["speaker", "text"],
    "properties": {"speaker": {"type": "string", "enum": ["user", "assistant"]}, "text": {"type": "string"}}}}}}


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _call(base_url: str, prompt: str, max_tokens: int, schema: dict | None = None) -> tuple[float, dict]:
    body: dict = {"model": "local", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                  "temperature": 0.7, "seed": 1}
    if schema:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    request = urllib.request.Request(f"{base_url}/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=900) as response:
        usage = json.load(response)["usage"]
    return time.perf_counter() - started, usage


def measure(threads: int, log_dir: Path) -> dict[str, float]:
    server = LocalServer(LocalServerConfig(threads=threads), log_dir)
    base_url = server.ensure()
    try:
        seconds, usage = _call(base_url, LONG + "\nSummarise.", 48)
        prompt = usage["prompt_tokens"] / seconds
        seconds, usage = _call(base_url, "Write a long story about a bus driver.", 300)
        decode = usage["completion_tokens"] / seconds
        seconds, usage = _call(base_url, "Write a dialogue of 6 turns between a user and an assistant about sleep.",
                               300, SCHEMA)
        return {"prompt": prompt, "decode": decode, "schema": usage["completion_tokens"] / seconds}
    finally:
        server.stop()


def main() -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="pal-bench-threads-"))
    print(f"{'machine':<22} {'threads':>7} {'prompt tok/s':>13} {'decode tok/s':>13} {'schema tok/s':>13}")
    for label, busy in (("quiet", False), ("one busy process", True)):
        for threads in (1, 2):
            other = multiprocessing.Process(target=_busy, args=(600,), daemon=True) if busy else None
            if other:
                other.start()
            try:
                f = measure(threads, log_dir)
            finally:
                if other:
                    other.terminate()
            print(f"{label:<22} {threads:>7} {f['prompt']:>13.0f} {f['decode']:>13.1f} {f['schema']:>13.1f}")


if __name__ == "__main__":
    main()
