"""Child process: serve a GGUF model with xllamacpp's embedded llama.cpp HTTP server.

Run by :mod:`backends.local_server` (never imported by the app). It listens on 127.0.0.1 only,
serves ``/v1/chat/completions``, ``/v1/models``, ``/health``, ``/slots`` and ``/metrics`` (its own counters: prompt
tokens computed, tokens predicted, busy slots — what ``bench/model_throughput.py`` reads), and exits on SIGTERM/SIGINT or
when its parent dies (``PR_SET_PDEATHSIG``), so no server outlives the app.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import sys
import threading


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: the supervisor's atexit hook still stops us
        logging.getLogger(__name__).info("PR_SET_PDEATHSIG unavailable; relying on the supervisor's atexit hook")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", default="local")
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    _die_with_parent()

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.model_alias = args.alias
    params.offline = True
    params.use_jinja = True
    params.warmup = False
    params.endpoint_metrics = True
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    _server = xllamacpp.Server(params)  # returns once listening; kept referenced until the process exits
    print(f"ready on 127.0.0.1:{args.port}", flush=True)
    stop.wait()
    # exit at once: deleting the server waits for a generation in flight without letting other Python threads run,
    # so a grace-period timer never fired and a busy server outlived its killed parent; the OS frees everything
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
