"""Start the real app with ``streamlit run`` and drive it in Debian's headless Chromium."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_available() -> bool:
    return Path(CHROMIUM).exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(env: dict[str, str] | None = None, timeout: float = 60.0, args: list[str] | None = None,
                port: int | None = None, script: str | None = None):
    """Yield the base URL of ``streamlit run serve.py`` on a free loopback port; stop it afterwards.

    The app runs as one local person (``PAL_AUTH=local``) unless ``env`` says otherwise; ``args`` are
    further ``streamlit run`` options (e.g. ``--secrets.files``). ``script`` defaults to ``serve.py`` — the app behind
    its front door, with its sign-in route: what ``make run``, ``make present`` and ``make serve`` run."""
    port = port or free_port()
    script = script or "serve.py"
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / script), "--server.address", "127.0.0.1",
           "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
           *(args or [])]
    # the server's output goes to a file: a pipe nobody reads blocks the server once its buffer is full
    output = tempfile.NamedTemporaryFile(prefix="pal-app-", suffix=".log", delete=False)  # closed below
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PAL_AUTH": "local", **(env or {})},
                            stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.3)
        else:
            tail = Path(output.name).read_text(errors="replace")[-2000:]
            raise RuntimeError(f"streamlit did not become healthy within {timeout:.0f} s; its output ends:\n{tail}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        output.close()
        Path(output.name).unlink(missing_ok=True)


@contextmanager
def browser_page(width: int = 1400, height: int = 2400):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()



def wait_idle(page, timeout_ms: int = 90_000) -> None:
    """Wait until the app has no script run in progress (``stApp``'s script state is ``notRunning``): a key
    pressed during a rerun can be lost while its elements are replaced, one pressed when idle is not."""
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(timeout=timeout_ms)


def show_whole_memory_graph(page) -> None:
    """On the Memory page, turn off the graph's focus on the selected item (on by default for a large memory), so
    the whole memory is drawn; returns once the page has redrawn."""
    page.get_by_text("Focus on the selected item").first.wait_for(timeout=60_000)
    if page.get_by_label("Focus on the selected item").first.is_checked():
        page.get_by_text("Focus on the selected item").first.click()
        page.wait_for_timeout(1000)
        wait_idle(page)
