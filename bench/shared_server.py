"""Figures for a lab sharing one PAL Studio: sign-in latency, concurrent annotators, writers beside a slow reader,
and redaction throughput. Run: ``.venv/bin/python bench/shared_server.py``.

- Sign-in p50 for a right password, a wrong one and an unknown name (the same cost: one bcrypt check each).
- 8 annotators answering 500 items each at once (one thread each, one answer per call as the page does):
  answers stored must equal answers given.
- Writer latency p95 while a slow reader holds a read transaction: reads through ``Database.read`` (deferred,
  read-only) against the old path, where every read took ``BEGIN IMMEDIATE`` (the write lock).
- Redaction (EN/ZH, phone numbers by libphonenumber): texts per second over the demo dataset.
- Sign-in sessions: sessions created and validated per second by the store (one thread, and 8 at once).
- Sign-in and reload over HTTP (``serve.py``, and through Debian's nginx with TLS when installed): the sign-in
  route's answer, the first page run after it, a reload's page run (a websocket run with the cookie, as the
  browser makes it), and in headless Chromium (when installed) sign-in to a rendered deep link and an F5.
  ``--no-server`` skips these.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlite3  # noqa: E402

from review.batches import plan_batch  # noqa: E402
from studio.workspace import Workspace  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bench_sign_in(ws: Workspace, n: int = 20) -> None:
    accounts = ws.accounts
    accounts.add("alice", "annotator", "correct-horse-battery")
    for label, name, password in (("right password", "alice", "correct-horse-battery"),
                                  ("wrong password", "alice", "wrong-password-here"),
                                  ("unknown name", "nobody", "wrong-password-here")):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            accounts.verify(name, password)
            times.append((time.perf_counter() - t0) * 1000)
        print(f"sign-in {label:15s} p50 {statistics.median(times):7.1f} ms  p95 {pct(times, 0.95):7.1f} ms  (n={n})")


def bench_annotators(ws: Workspace, people: int = 8, answers: int = 500) -> None:
    store = ws.reviews
    names = [f"ann{i}" for i in range(people)]
    items = [(f"k{i:05d}", {"item_id": f"m{i}", "text": "x", "layer": "fact", "session_id": "s",
                            "provenance": [], "build_id": "b"}) for i in range(answers)]
    batch = store.create_batch(plan_batch("bench", "memory", "bench", items, answers, 1, people, names), "bench")
    latencies: list[float] = []
    lock = threading.Lock()

    def annotate(name: str) -> None:
        mine = store.assigned(batch, name)
        for no in mine:
            t0 = time.perf_counter()
            store.answer(batch, no, name, "verdict", "correct")
            with lock:
                latencies.append((time.perf_counter() - t0) * 1000)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=annotate, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    stored = store.count_answers(batch)
    print(f"{people} annotators x {answers} answers: given {people * answers}, stored {stored} "
          f"({'equal' if stored == people * answers else 'LOST ANSWERS'}), {wall:.1f} s wall, "
          f"answer p50 {statistics.median(latencies):.2f} ms p95 {pct(latencies, 0.95):.2f} ms")


def bench_writer_beside_slow_reader(ws: Workspace, mode: str, hold_s: float = 0.2, seconds: float = 4.0) -> None:
    store = ws.reviews
    store.create_batch(plan_batch("w", "memory", "bench", [("k0", {"item_id": "m", "text": "x", "layer": "fact",
                                                                   "session_id": "s", "provenance": [],
                                                                   "build_id": "b"})], 1, 1, 1, ["w"]), "bench")
    batch = store.batches()[0]["batch_id"]
    stop = threading.Event()
    opener = ws.db.read if mode == "read-only" else ws.db.write  # the old path: every read took the write lock

    def slow_reader() -> None:
        while not stop.is_set():
            with opener() as conn:  # an export or a dashboard walking the answers slowly
                conn.execute("SELECT COUNT(*) FROM review_answers").fetchone()
                time.sleep(hold_s)
            time.sleep(0.05)

    reader = threading.Thread(target=slow_reader)
    reader.start()
    latencies, failed = [], 0
    deadline = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        try:
            store.answer(batch, 1, "w", f"q{i}", "v")
        except sqlite3.OperationalError:  # "database is locked": the writer gave up
            failed += 1
        latencies.append((time.perf_counter() - t0) * 1000)
        i += 1
        time.sleep(0.01)
    stop.set()
    reader.join()
    print(f"writer beside a slow reader ({mode:16s}, reader holds {hold_s * 1000:.0f} ms): "
          f"p50 {statistics.median(latencies):6.1f} ms  p95 {pct(latencies, 0.95):6.1f} ms  "
          f"max {max(latencies):6.1f} ms  ({len(latencies)} writes, {failed} failed)")


def bench_redaction() -> None:
    from memory.privacy import redact
    from palset.loader import load_dataset

    texts = [lg.content for u in load_dataset(ROOT / "data" / "demo").users.values() for s in u.sessions for lg in s.logs]
    t0 = time.perf_counter()
    for text in texts:
        redact(text)
    elapsed = time.perf_counter() - t0
    print(f"redaction: {len(texts)} demo log texts in {elapsed:.2f} s = {len(texts) / elapsed:,.0f} texts/s "
          "(uncached; redact_text memoises repeats)")


def bench_sessions(ws: Workspace, n: int = 2000, threads: int = 8) -> None:
    ws.accounts.add("ann", "annotator", "correct-horse-battery")
    t0 = time.perf_counter()
    cookies = [ws.sessions.issue("ann", client="203.0.113.7", user_agent="bench") for _ in range(n)]
    created = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    assert all(ws.sessions.resolve(c) is not None for c in cookies)
    validated = n / (time.perf_counter() - t0)
    forged = [c[:-2] + ("AA" if not c.endswith("AA") else "BB") for c in cookies[:500]]
    t0 = time.perf_counter()
    assert not any(ws.sessions.resolve(c) for c in forged)
    refused = len(forged) / (time.perf_counter() - t0)
    per_thread = n // threads

    def validate(chunk: list[str]) -> None:
        for c in chunk:
            ws.sessions.resolve(c)

    workers = [threading.Thread(target=validate, args=(cookies[i * per_thread:(i + 1) * per_thread],))
               for i in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    parallel = per_thread * threads / (time.perf_counter() - t0)
    print(f"sessions: create {created:,.0f}/s, validate {validated:,.0f}/s (one thread), {parallel:,.0f}/s "
          f"({threads} threads), forged cookie refused {refused:,.0f}/s (no store read); n={n}")


def bench_http(tmp_path: Path) -> None:
    """Sign-in and reload against ``serve.py``, directly and through nginx (TLS) when it is installed."""
    from testkit.browser import chromium_available, running_app
    from testkit.proxy import nginx_available, running_nginx
    from testkit.streamlit_client import Visitor, run_page

    env = {"PAL_HOME": str(tmp_path / "http"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "accounts", "PAL_TRUST_PROXY": "1"}
    make_workspace(Path(env["PAL_HOME"])).accounts.add("boss", "admin", "correct-horse-battery")
    with running_app(env=env, timeout=120) as app:
        port = int(app.rsplit(":", 1)[1])
        targets = [("direct (http)", app)]
        stack = None
        if nginx_available():
            stack = running_nginx(port, tmp_path / "nginx")
            targets.append(("through nginx (https)", stack.__enter__()))
        try:
            run_page(app, "home")  # warm: the first run loads the app's modules
            for label, base in targets:
                _http_figures(label, base, Visitor, run_page)
                if chromium_available():
                    _browser_figures(label, base)
        finally:
            if stack is not None:
                stack.__exit__(None, None, None)


def _http_figures(label: str, base: str, visitor_cls, run_page, n: int = 5) -> None:
    post, first, reload = [], [], []
    for _ in range(n):
        v = visitor_cls(base)
        v.open("/users?user=1001")
        t0 = time.perf_counter()
        status, location = v.sign_in("boss", "correct-horse-battery", "/users?user=1001")
        t1 = time.perf_counter()
        _, text = run_page(base, "users", query="user=1001", cookies=v.cookie_header(), xsrf=v.cookie("_streamlit_xsrf"))
        t2 = time.perf_counter()
        assert status == 303 and location == "/users?user=1001" and "Signed in as" in text
        _, again = run_page(base, "users", query="user=1001", cookies=v.cookie_header(),
                            xsrf=v.cookie("_streamlit_xsrf"))
        t3 = time.perf_counter()
        assert "Signed in as" in again
        post.append((t1 - t0) * 1000)
        first.append((t2 - t1) * 1000)
        reload.append((t3 - t2) * 1000)
    print(f"{label}: sign-in route {statistics.median(post):.0f} ms (bcrypt + session), first page run "
          f"{statistics.median(first):.0f} ms, reload page run {statistics.median(reload):.0f} ms (medians of {n})")


def _browser_figures(label: str, base: str, n: int = 3) -> None:
    from playwright.sync_api import sync_playwright

    from testkit.browser import CHROMIUM, CHROMIUM_ARGS

    sign, reload = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for _ in range(n):
                ctx = browser.new_context(ignore_https_errors=True)
                page = ctx.new_page()
                page.goto(f"{base}/users?user=1001&tab=Timeline")
                page.get_by_role("textbox", name="Name", exact=True).fill("boss")
                page.get_by_role("textbox", name="Password", exact=True).fill("correct-horse-battery")
                t0 = time.perf_counter()
                page.get_by_role("button", name="Sign in", exact=True).click()
                page.get_by_role("heading", name="Dale Brennan").wait_for(timeout=60_000)
                t1 = time.perf_counter()
                page.reload()
                page.get_by_role("heading", name="Dale Brennan").wait_for(timeout=60_000)
                t2 = time.perf_counter()
                sign.append((t1 - t0) * 1000)
                reload.append((t2 - t1) * 1000)
                ctx.close()
        finally:
            browser.close()
    print(f"{label}, Chromium: Sign in pressed → deep link rendered {statistics.median(sign):.0f} ms; F5 → page "
          f"rendered again, still signed in {statistics.median(reload):.0f} ms (medians of {n})")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        bench_sessions(make_workspace(tmp_path / "sessions"))
        if "--no-server" not in sys.argv:
            bench_http(tmp_path)
        bench_sign_in(make_workspace(tmp_path / "accounts"))
        bench_annotators(make_workspace(tmp_path / "answers"))
        for mode in ("read-only", "BEGIN IMMEDIATE"):
            bench_writer_beside_slow_reader(make_workspace(tmp_path / f"rw-{mode[:4]}"), mode)
    bench_redaction()


if __name__ == "__main__":
    main()
