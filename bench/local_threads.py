"""Figures for local model servers: threads, speed, start time and memory per model.

For each model (default: SmolLM2-135M and the default Qwen2.5-Coder-0.5B) and 1 and 2 llama.cpp threads, on the
machine as it is and beside one more busy process (what another test worker is): server start (file check and
load), prompt processing (a ≈600-token prompt), decoding (plain and under a JSON schema) in tokens/s by the server's
own usage counts, and the server's resident memory. Also what ``threads = "auto"`` would choose at that moment,
and the file preparation: joining the parts into a fresh cache and hashing a joined file.

Two threads that wait for each other on a shared core decode slower than one; that is why ``threads = "auto"``
(``backends/llm/threads.py``) gives a server one thread per free core, and the test workers one thread each.

Run: ``.venv/bin/python bench/local_threads.py [--models smollm2-135m,qwen2.5-coder-0.5b] [--decode 128]``
(about five minutes on 2 cores with the defaults; nothing is written but logs and a joined copy in a temporary
folder).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.config import LocalServerConfig  # noqa: E402
from backends.llm.local_server import LocalServer  # noqa: E402
from backends.llm.threads import measure_load, resolve_threads  # noqa: E402
from backends.local_models import find_model  # noqa: E402
from backends.model_files import prepare_model, sha256_of  # noqa: E402

LONG = " ".join(f"On day {i} I walked to the shop and bought bread, milk and {i} apples for my family." for i in range(25))
SCHEMA = {"type": "object", "required": ["turns"], "properties": {"turns": {"type": "array", "maxItems": 6, "items": {
    "type": "object", "required": ["speaker", "text"],
    "properties": {"speaker": {"type": "string", "enum": ["user", "assistant"]},
                   "text": {"type": "string", "maxLength": 200}}}}}}


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _call(base_url: str, prompt: str, max_tokens: int, schema: dict | None = None) -> tuple[float, dict]:
    body: dict = {"model": "local", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                  "temperature": 0.7, "seed": 1, "cache_prompt": False}
    if schema:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    request = urllib.request.Request(f"{base_url}/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=1800) as response:
        usage = json.load(response)["usage"]
    return time.perf_counter() - started, usage


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(model: str, threads: int, log_dir: Path, decode: int) -> dict[str, float]:
    server = LocalServer(LocalServerConfig(threads=threads, ctx=4096, parallel=1), log_dir, model)
    started = time.perf_counter()
    base_url = server.ensure()
    start_s = time.perf_counter() - started
    try:
        seconds, usage = _call(base_url, LONG + "\nSummarise in one sentence.", 1)
        prompt = usage["prompt_tokens"] / seconds
        seconds, usage = _call(base_url, "Write a long story about a bus driver.", decode)
        plain = usage["completion_tokens"] / seconds
        seconds, usage = _call(base_url, "Write a dialogue of 6 turns between a user and an assistant about sleep.",
                               decode, SCHEMA)
        schema = usage["completion_tokens"] / seconds
        rss = _rss_mib(server.proc.pid) if server.proc else float("nan")
        return {"start": start_s, "prompt": prompt, "decode": plain, "schema": schema, "rss": rss}
    finally:
        server.stop()


def preparation(name: str) -> None:
    model = find_model(name)
    if model is None or not model.joined:
        return
    with tempfile.TemporaryDirectory(prefix="pal-bench-join-") as cache:
        os.environ["PAL_MODEL_CACHE"] = cache
        try:
            ready = prepare_model(model)
            started = time.perf_counter()
            sha256_of(Path(ready.path))
            hashed = time.perf_counter() - started
        finally:
            os.environ.pop("PAL_MODEL_CACHE")
    print(f"{model.name}: {len(model.parts)} parts joined and hashed (part and whole) in {ready.joined_s:.1f} s; "
          f"hashing the joined {model.size / 2**20:.0f} MiB again: {hashed:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--decode", type=int, default=128, help="tokens decoded per measurement")
    parser.add_argument("--conditions", default="as is,one busy process")
    args = parser.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for name in models:
        preparation(name)
    log_dir = Path(tempfile.mkdtemp(prefix="pal-bench-threads-"))
    load = measure_load(1.0)
    print(f"machine now: {load.others if load else float('nan'):.2f} of {load.cores if load else '?'} cores busy with "
          f"other processes; threads = \"auto\" would choose: {resolve_threads('auto')[1]}")
    print(f"{'model':<36} {'machine':<18} {'threads':>7} {'start s':>8} {'prompt tok/s':>13} {'decode tok/s':>13} "
          f"{'schema tok/s':>13} {'RSS MiB':>8}")
    for condition in [c.strip() for c in args.conditions.split(",")]:
        for name in models:
            for threads in [int(t) for t in args.threads.split(",")]:
                other = (multiprocessing.Process(target=_busy, args=(3600,), daemon=True)
                         if condition == "one busy process" else None)
                if other:
                    other.start()
                try:
                    f = measure(name, threads, log_dir, args.decode)
                finally:
                    if other:
                        other.terminate()
                shown = model.name if (model := find_model(name)) else name
                print(f"{shown:<36} {condition:<18} {threads:>7} {f['start']:>8.1f} {f['prompt']:>13.0f} "
                      f"{f['decode']:>13.1f} {f['schema']:>13.1f} {f['rss']:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
