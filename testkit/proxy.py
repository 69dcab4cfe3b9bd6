"""Debian's nginx in front of the app, as the deployment guide sets it up, for tests and benches.

:func:`running_nginx` fills ``deploy/nginx.conf.template`` (the one copy of the configuration; docs/deployment.md shows it)
with a loopback port, a self-signed certificate made here (:func:`self_signed_certificate`, with ``openssl``) and the
app's port, and runs nginx in the foreground with its own pid, logs and temporary folders. :func:`tcp_forwarder`
relays connections to a port from another loopback source address (``127.0.0.2``, ``127.0.0.3``…), so nginx sees
visitors with different addresses — real TCP peers, nothing in a header.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from testkit.browser import ROOT, free_port

TEMPLATE = ROOT / "deploy" / "nginx.conf.template"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def nginx_available() -> bool:
    return Path(NGINX).exists() and shutil.which("openssl") is not None


def self_signed_certificate(folder: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """(certificate, key) for ``host`` (an IP address or a name), valid one day."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "cert.pem", folder / "key.pem"
    san = f"IP:{host}" if host.replace(".", "").isdigit() else f"DNS:{host}"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={host}",
                    "-addext", f"subjectAltName={san}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def render_site(listen: str, server_name: str, cert: Path, key: Path, upstream: str) -> str:
    """The template with its placeholders filled in (nothing else changes)."""
    text = TEMPLATE.read_text(encoding="utf-8")
    for name, value in (("LISTEN", listen), ("SERVER_NAME", server_name), ("CERTIFICATE", str(cert)),
                        ("CERTIFICATE_KEY", str(key)), ("UPSTREAM", upstream)):
        text = text.replace(f"@{name}@", value)
    return text


def _main_config(folder: Path, site: Path) -> str:
    """What /etc/nginx/nginx.conf would give around the site: here with every path in ``folder``."""
    temp = folder / "temp"
    temp.mkdir(exist_ok=True)
    user = "user root;\n" if _root() else ""  # workers write request bodies into the test's private folder
    paths = "\n".join(f"    {kind}_temp_path {temp / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                            "scgi"))
    return (f"{user}worker_processes 1;\ndaemon off;\npid {folder / 'nginx.pid'};\n"
            f"error_log {folder / 'error.log'} warn;\nevents {{ worker_connections 512; }}\nhttp {{\n"
            f"    access_log {folder / 'access.log'};\n{paths}\n    include {site};\n}}\n")


def _root() -> bool:
    import os

    return os.geteuid() == 0


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


@contextmanager
def running_nginx(upstream_port: int, folder: Path, timeout: float = 20.0) -> Iterator[str]:
    """Yield ``https://127.0.0.1:PORT``: nginx with the deployment template in front of ``upstream_port``."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = self_signed_certificate(folder / "tls")
    port = free_port()
    site = folder / "site.conf"
    site.write_text(render_site(f"127.0.0.1:{port}", "127.0.0.1", cert, key, f"127.0.0.1:{upstream_port}"),
                    encoding="utf-8")
    conf = folder / "nginx.conf"
    conf.write_text(_main_config(folder, site), encoding="utf-8")
    check = subprocess.run([NGINX, "-t", "-q", "-c", str(conf), "-p", str(folder)], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"nginx refused the configuration: {check.stderr}")
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(folder)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_port(port, timeout)
        yield f"https://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


@contextmanager
def tcp_forwarder(target_port: int, source: str) -> Iterator[int]:
    """Yield a loopback port whose connections reach ``target_port`` from the address ``source`` (127.x.y.z)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.socket()
            try:
                upstream.bind((source, 0))
                upstream.connect(("127.0.0.1", target_port))
            except OSError:
                client.close()
                upstream.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
