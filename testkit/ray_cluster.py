"""A real Ray cluster on this machine for tests and benches: a head started with ``ray start --head`` and more
nodes joined with ``ray start --address``, as a lab starts them on its machines.

Every node runs ``ray start --block`` in a session of its own, with ports of its own and a temporary folder of its
own, so it shares nothing with another Ray on the machine; leaving the context ends each node's process group
(the node's raylet, object store and workers) by its id — never ``ray stop``, which would stop every Ray of the
user. ``cpus``: the CPUs each node says it has. The cluster listens on this machine only and runs without Ray's
token authentication (``RAY_AUTH_MODE=disabled``, set for the nodes and, inside the context, for this process):
a token in ``~/.ray`` — written by any local ``ray.init()`` on the machine — would otherwise be read by one side
and not the other.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)
RAY = str(Path(sys.executable).with_name("ray"))
PORT_FLAGS = ("--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
              "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node(args: list[str], temp: Path, env: dict[str, str]) -> subprocess.Popen:
    ports = [x for flag in PORT_FLAGS for x in (flag, str(free_port()))]
    log_file = open(temp / f"node-{len(list(temp.glob('node-*.log')))}.log", "w")  # kept open for the node's life
    return subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats", *ports, *args], env=env,
                            stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)


def _end(proc: subprocess.Popen) -> None:
    """End the node's process group: SIGTERM (``ray start --block`` stops what it started), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            os.killpg(proc.pid, signal.SIGKILL)  # what the node left behind in its group
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            log.warning("ray node %d did not stop on %s", proc.pid, sig.name)


def alive_nodes(address: str) -> int:
    """Nodes the cluster at ``address`` says are alive (asked from a subprocess: no Ray in this one)."""
    code = (f"import ray; ray.init(address={address!r}, log_to_driver=False, include_dashboard=False); "
            "print(sum(n['Alive'] for n in ray.nodes()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    try:
        return int(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        log.warning("ray cluster at %s did not answer: %s", address, out.stderr[-500:])
        return 0


@contextmanager
def local_cluster(nodes: int = 2, cpus: int = 1, timeout: float = 180.0) -> Iterator[str]:
    """A head and ``nodes - 1`` more nodes on this machine; yields the head's address (``host:port``) once every
    node has joined."""
    temp = Path(tempfile.mkdtemp(prefix="pal-ray-"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    before = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # this process's driver connects as the nodes expect
    port = free_port()
    address = f"127.0.0.1:{port}"
    procs = [_node(["--head", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", str(cpus),
                    "--include-dashboard", "false", "--ray-client-server-port", str(free_port()),
                    "--temp-dir", str(temp)], temp, env)]
    try:
        deadline = time.monotonic() + timeout
        while alive_nodes(address) < 1:
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise RuntimeError(f"ray head did not start (log: {temp})")
            time.sleep(1.0)
        for _ in range(nodes - 1):
            procs.append(_node(["--address", address, "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus)],
                               temp, env))
        while alive_nodes(address) < nodes:
            if time.monotonic() > deadline:
                raise RuntimeError(f"ray nodes did not join within {timeout:.0f} s (log: {temp})")
            time.sleep(1.0)
        yield address
    finally:
        for proc in reversed(procs):
            _end(proc)
        if before is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = before
