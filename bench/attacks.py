"""Every attack of the security audit (commit f85593f) tried against this code, one line each: what was tried and
what happened. Run: ``.venv/bin/python bench/attacks.py`` (``--no-server`` skips the one that starts the app).

Findings the page tests cover through the running app (AppTest) are named with their test instead of being
re-enacted here: 6, 14, 15, 16, 17, 23 (see ``tests/pages/test_review_page.py``, ``test_presentation_security.py``,
``test_generate.py``).

The second audit (the lab-server audit, rows ``52.<n>``) is tried the same way, each attack first reproduced on what it relied on
(Streamlit's own checks, a session not bound to its page, a check-then-record throttle, a 0644 file, the markdown a
guideline would have rendered to), then against this code; the last line counts the attacks and how many got through.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import sys
import tempfile
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PAL_EMBEDDER", "hash")

from palset.dataset import dataset_key  # noqa: E402
from palset.loader import load_dataset  # noqa: E402
from review.batches import plan_batch, quality_candidates  # noqa: E402
from studio.bundle.export import export_bundle  # noqa: E402
from studio.bundle.importer import BundleError, import_bundle  # noqa: E402
from studio.bundle.manifest import MANIFEST, table_member  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

DEMO = ROOT / "data" / "demo"
ROWS: list[tuple[str, str, str]] = []


REFUSED: list[bool] = []  # the second audit's rows: whether this code refused the attack


def row(finding: str, attack: str, outcome: str, refused: bool | None = None) -> None:
    ROWS.append((finding, attack, outcome))
    if refused is not None:
        REFUSED.append(refused)
    mark = "" if refused is None else (" | refused" if refused else " | GOT THROUGH")
    print(f"{finding:>4} | {attack} | {outcome}{mark}", flush=True)


def measured(fn: Callable[[], str]) -> str:
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        outcome = fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return f"{outcome} ({(time.perf_counter() - t0) * 1000:.0f} ms, peak {peak / 2**20:.1f} MiB)"


def refusal(target, path: Path) -> str:
    try:
        import_bundle(target, path, known={"demo": DEMO})
    except BundleError as e:
        return str(e).split(": refused: ", 1)[1][:110]
    except Exception as e:  # noqa: BLE001 - an attack table reports whatever happened, raw exceptions included
        return f"RAW {type(e).__name__}: {e}"[:110]
    return "IMPORTED"


# ------------------------------------------------------------------------------------------------ bundles


def source_bundle(tmp: Path) -> Path:
    from sim.types import RunRecord, RunSpec

    ws = make_workspace(tmp / "src", env={"PAL_EMBEDDER": "hash"})
    dataset = load_dataset(DEMO)
    ws.open_builder(dataset, "1000", "gold").run()
    spec = RunSpec(dataset=dataset_key(DEMO), user_id="1000", sample_id="1000_sample7", topic_key="topic-1",
                   method="gold")
    ws.sims.create(RunRecord(run_id="run-1000-gold-x", spec=spec, status="finished"))
    ws.reviews.create_batch(plan_batch("Q", "quality", dataset_key(DEMO), quality_candidates(dataset)[:3], 2, 5, 1,
                                       ["ann"]), "boss")
    out = tmp / "work.palbundle"
    export_bundle(ws, dataset, out)
    return out


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def zipped(path: Path, parts: dict[str, bytes], resign: bool = True) -> Path:
    if resign:
        manifest = json.loads(parts[MANIFEST])
        for name, info in manifest["members"].items():
            info.update(sha256=hashlib.sha256(parts[name]).hexdigest(), bytes=len(parts[name]),
                        rows=parts[name].count(b"\n"))
        parts = {**parts, MANIFEST: json.dumps(manifest).encode()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return path


def edited(parts: dict[str, bytes], table: str, change: Callable[[dict], None]) -> dict[str, bytes]:
    name = table_member(table)
    rows = [json.loads(line) for line in parts[name].decode().splitlines()]
    change(rows[0])
    return {**parts, name: "".join(json.dumps(r) + "\n" for r in rows).encode()}


def streamed(path: Path, parts: dict[str, bytes], big: str, size: int) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)
        with z.open(big, "w", force_zip64=True) as f:
            for _ in range(size >> 20):
                f.write(b" " * (1 << 20))
    return path


def bundle_attacks(tmp: Path) -> None:
    good = source_bundle(tmp)
    target = make_workspace(tmp / "target", env={"PAL_EMBEDDER": "hash"})
    parts = members(good)
    no_manifest = {k: v for k, v in parts.items() if k != MANIFEST}
    bomb = streamed(tmp / "bomb.palbundle", no_manifest, MANIFEST, 256 << 20)
    row("3", f"manifest inflating to 256 MiB in a {bomb.stat().st_size >> 10} KiB bundle",
        measured(lambda: refusal(target, bomb)))
    os.environ["PAL_MAX_BUNDLE_MB"] = "64"
    name = table_member("memory_items")
    manifest = json.loads(parts[MANIFEST])
    manifest["members"][name]["bytes"] = 256 << 20
    big = streamed(tmp / "big.palbundle", {**{k: v for k, v in parts.items() if k != name},
                                           MANIFEST: json.dumps(manifest).encode()}, name, 256 << 20)
    row("3", f"a 256 MiB member in a {big.stat().st_size >> 10} KiB bundle (PAL_MAX_BUNDLE_MB=64)",
        measured(lambda: refusal(target, big)))
    del os.environ["PAL_MAX_BUNDLE_MB"]
    cases: list[tuple[str, str, dict[str, bytes], bool]] = [
        ("8", "manifest nested 200,000 deep", {**parts, MANIFEST: b"[" * 200_000 + b"]" * 200_000}, False),
        ("8", "manifest not UTF-8", {**parts, MANIFEST: parts[MANIFEST].replace(b'"how": [', b'"how": ["\xff", ', 1)},
         False),
        ("8", "a row nested 100,000 deep", {**parts, name: parts[name] + b"[" * 100_000 + b"]" * 100_000 + b"\n"},
         True),
        ("8", "NULL in a NOT NULL column", edited(parts, "memory_build_stages", lambda r: r.update(stage=None)), True),
        ("8", "an item of no batch", edited(parts, "review_items", lambda r: r.update(batch_id="b-00000000")), True),
        ("7", "unknown review task", edited(parts, "review_batches", lambda r: r.update(task="essay")), True),
        ("7", "invalid run status", edited(parts, "sim_runs", lambda r: r.update(status="exploded", data=json.dumps(
            {**json.loads(r["data"]), "status": "exploded"}))), True),
        ("7", "a row of another dataset (a server path)",
         edited(parts, "review_batches", lambda r: r.update(dataset="/srv/other-lab/data")), True),
        ("7", "a backtick in a batch id",
         edited(parts, "review_batches", lambda r: r.update(batch_id="b-1`[x](https://evil.example)`")), True),
    ]
    for finding, attack, content, resign in cases:
        path = zipped(tmp / "case.palbundle", content, resign=resign)
        row(finding, attack + (" (re-signed)" if resign else ""), measured(lambda p=path: refusal(target, p)))
    for attack, offset, value in (("an encrypted entry", 6, 0x1), ("compression method 97", 8, 97)):
        path = zipped(tmp / "flag.palbundle", parts, resign=False)
        raw = bytearray(path.read_bytes())
        raw[offset:offset + 2] = value.to_bytes(2, "little")
        central = raw.find(b"PK\x01\x02")
        raw[central + offset + 2:central + offset + 4] = value.to_bytes(2, "little")
        path.write_bytes(bytes(raw))
        row("8", attack, refusal(target, path))
    cut = tmp / "cut.palbundle"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    row("8", "a truncated file", refusal(target, cut))
    dup = tmp / "dup.palbundle"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(dup, "w") as z:
            for n, data in parts.items():
                z.writestr(n, data)
            z.writestr(name, parts[name])
    row("18", "two entries with one name", refusal(target, dup))
    row("—", "the untouched bundle", refusal(target, good).replace("IMPORTED", "imported"))


# ------------------------------------------------------------------------------------------------ sign-in


def access_attacks(tmp: Path) -> None:
    from review.clients import client_address
    from review.throttle import SignInThrottle

    ws = make_workspace(tmp / "acc")
    ws.accounts.add("alice", "admin", None, email="alice@lab.example")
    account, why = ws.accounts.for_identity("https://idp", "mallory", "alice@lab.example", False)
    row("2", "OIDC sub=mallory, email=alice@…, email_verified=false", f"{account} — {why}")
    ws.accounts.for_identity("https://idp", "alice-sub", "alice@lab.example", True)
    account, why = ws.accounts.for_identity("https://idp", "mallory", "alice@lab.example", True)
    row("2", "alice bound; another subject with her verified e-mail", f"{account} — {why}")
    trust = {"PAL_TRUST_PROXY": "1"}
    row("10", "X-Forwarded-For: 1.2.3.4 forged left of the proxy's hop 198.51.100.7",
        f"address taken: {client_address('127.0.0.1', '1.2.3.4, 198.51.100.7', env=trust)}")
    row("10", "X-Forwarded-For sent straight to the app (not via the proxy)",
        f"address taken: {client_address('203.0.113.5', '127.0.0.1', env=trust)}")
    t = SignInThrottle(clock=lambda: 0.0)
    for victim in ("a", "b", "c", "d", "e"):
        t.failed(victim, "203.0.113.9")
        t.succeeded("mallory", "203.0.113.9")
    row("11", "5 guesses at others, each followed by a sign-in to the attacker's own account",
        f"next guess waits {t.wait_s('f', '203.0.113.9'):.0f} s")
    t = SignInThrottle(clock=lambda: 0.0)
    free = 0
    while t.wait_s("x", "10.0.0.1") == 0:
        t.failed("x", "10.0.0.1")
        free += 1
    row("25", "wrong passwords until the throttle waits", f"{free} free failures (README: five)")
    cookie = ws.sessions.issue("alice") if ws.accounts.get("alice") else ""
    row("1", "a forged session cookie (signature changed)", str(ws.sessions.resolve(cookie[:-2] + "AA")))


def takeover_attack(tmp: Path) -> None:
    from testkit.browser import running_app
    from testkit.streamlit_client import Visitor, run_page

    env = {"PAL_HOME": str(tmp / "live"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "accounts"}
    make_workspace(Path(env["PAL_HOME"])).accounts.add("boss", "admin", "correct-horse-battery")
    with running_app(env=env, timeout=120) as url:
        admin = Visitor(url)
        admin.open("/audit")
        admin.sign_in("boss", "correct-horse-battery", "/audit")
        sid, _ = run_page(url, "audit", cookies=admin.cookie_header(), xsrf=admin.cookie("_streamlit_xsrf"))
        resumed, page = run_page(url, "audit", session_id=sid)
        outcome = ("signed out: the sign-in form" if "Sign in to continue" in page and "Signed in as" not in page
                   else "SIGNED IN AS THE ADMIN")
        row("1", "websocket reconnect with a signed-in admin's session id (from an upload URL)",
            f"{outcome} (session {'handed over' if resumed == sid else 'new'}, without identity)")
        evil = Visitor(url)
        evil.open("/")
        row("1", "sign-in form posted from another origin (login CSRF)",
            str(evil.sign_in("boss", "correct-horse-battery", origin="https://evil.example")))


# ------------------------------------------------------------------------------------------------ the rest


def other_attacks(tmp: Path) -> None:
    from backends.config import ConfigError
    from backends.csvsafe import neutralise
    from backends.llm.discovery import probe_window
    from palset.assemble import write_release
    from studio.workspace import config_with
    from testkit.fault_server import FaultServer
    from testkit.release import make_bundle, make_release
    from ui.text import error_text

    lab = make_workspace(tmp / "lab", env={"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_MODEL": "m",
                                           "PAL_DEFAULT_BASE_URL": "https://llm.lab.example/v1",
                                           "PAL_DEFAULT_API_KEY": "sk-lab-key"})
    with FaultServer(default=("ok", "hi")).running() as server:
        view = lab.configured({"roles": {"default": {"base_url": server.base_url}}})
        view.llm().chat("judge", [{"role": "user", "content": "hi"}], use_cache=False)
    sent = any("sk-lab-key" in " ".join(h.values()) for h in server.headers)
    row("4", "experiment file: roles.default.base_url = an attacker's server", f"lab key sent: {sent}")
    try:
        config_with(lab.config, {"roles": {"judge": {"base_url": "https://evil.example/v1"}}},
                    env={"PAL_ALLOWED_ENDPOINTS": "llm.lab.example"})
        row("4", "…the same with PAL_ALLOWED_ENDPOINTS=llm.lab.example", "ALLOWED")
    except ConfigError as e:
        row("4", "…the same with PAL_ALLOWED_ENDPOINTS=llm.lab.example", f"refused: {e}")
    closed = tmp / "x"
    handler = logging.FileHandler(closed, encoding="utf-8")
    logging.getLogger("backends.llm.discovery").addHandler(handler)
    logging.getLogger("backends.llm.discovery").setLevel(logging.DEBUG)
    probe_window("http://lab-user:hunter2@127.0.0.1:9/v1", "m", timeout=1)
    handler.close()
    row("13", "a base URL with user:password, endpoint down", f"password in the log: {'hunter2' in closed.read_text()}")
    row("20", 'report cell =HYPERLINK("https://evil.example","x")', f"written as {neutralise('=HYPERLINK(1)')[:3]}…")
    root = make_release(tmp / "rel", users=1, sessions=1, logs_per_session=1, turns=1, query_sessions=1)
    (root / "input.json").chmod(0o644)
    write_release(root, [make_bundle("0009", sessions=1, logs_per_session=1, turns=1)])
    row("21", "add a user to a release whose files are 0644",
        f"input.json now {oct(stat.S_IMODE((root / 'input.json').stat().st_mode))}")
    outside = tmp / "outside.json"
    outside.write_text(json.dumps({"9999": {}}), encoding="utf-8")
    (root / "timeline" / "timeline.json").unlink()
    (root / "timeline" / "timeline.json").symlink_to(outside)
    row("22", "timeline.json → a link to a file outside the folder",
        f"user 9999 read: {'9999' in load_dataset(root).users}")
    try:
        ws = make_workspace(tmp / "err")
        ws.open_builder(load_dataset(DEMO, lazy=True), "9999", "gold")
    except KeyError as e:
        row("24", "an error about a dataset folder", f"shown: {error_text(e)[:70]}")
    for finding, what, test in (("5", "calibration batch seed (A/B order computable from the title)",
                                 "tests/evaluation/test_eval_cli.py (seed random, not 0)"),
                                ("6", "annotator opens an item whose run is missing",
                                 "tests/pages/test_review_page.py::test_an_item_that_cannot_be_shown…"),
                                ("9", "kill -9 between release files", "tests/palset/test_files_safety.py::"
                                 "test_a_kill_between_release_files…"),
                                ("12", "/v1/models redirects to another host", "tests/backends/test_discovery.py"),
                                ("14–17", "presenting: accounts, audit, banner, claims, files",
                                 "tests/pages/test_presentation_security.py"),
                                ("19", "who made a calibration batch / an import", "tests/evaluation/test_eval_cli.py, "
                                 "tests/cli/test_workspace_cmds.py"),
                                ("23", "deeply nested JSON in the Generate editor", "tests/pages/test_generate.py")):
        row(finding, what, f"see {test}")


# ------------------------------------------------------------------------------------------- the second audit


def front_door_attacks(tmp: Path) -> None:
    """52.1 / 52.5: which websocket Origin and Host Streamlit's own check lets in, and what the front door says."""
    from streamlit.web.server.starlette.starlette_websocket import _is_origin_allowed

    from ui.web_guard import OriginPolicy

    port = "8501"
    cases = (("52.1", "websocket from a page on another port of the host", "http://127.0.0.1:8793",
              f"127.0.0.1:{port}", OriginPolicy(mode="accounts")),
             ("52.1", "websocket from localhost to a server opened as 127.0.0.1", f"http://localhost:{port}",
              f"127.0.0.1:{port}", OriginPolicy(mode="accounts")),
             ("52.5", "DNS rebinding: Host and Origin evil.example (local mode)", f"http://evil.example:{port}",
              f"evil.example:{port}", OriginPolicy(mode="local")))
    for finding, attack, origin, host, policy in cases:
        before = "accepted" if _is_origin_allowed(origin, host) else "refused"
        after = "accepted" if policy.origin_allowed(origin, host) else "refused"
        row(finding, attack, f"Streamlit alone: {before}; front door: {after}", refused=after == "refused")


def session_attacks(tmp: Path) -> None:
    """52.1 (cookie replay, login CSRF by a planted cookie), 52.2 (burst), 52.3 (stale page), 52.4 (files, key)."""
    import stat
    from concurrent.futures import ThreadPoolExecutor

    from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

    from backends.paths import make_private
    from review.sessions import rotate_key
    from review.throttle import SignInThrottle
    from ui.web_auth import Attempt, page_token, sign_in

    ws = make_workspace(tmp / "s52", env={"PAL_EMBEDDER": "hash"})
    ws.accounts.add("alice", "admin", "correct-horse-battery")
    ws.accounts.add("mallory", "annotator", "mallory-horse-battery")
    os.environ["PAL_AUTH"] = "accounts"
    xsrf, origin = generate_xsrf_token_string(), "https://pal.lab.example"

    def attempt(name: str, password: str, token: str = xsrf) -> Attempt:
        return Attempt(form={"pal_name": name, "pal_password": password, "pal_next": "/", "pal_xsrf": token},
                       peer="127.0.0.1", scheme="https", host="pal.lab.example", origin=origin, referer=None,
                       forwarded_for=None, forwarded_proto=None, user_agent="bench", xsrf_cookie=token)

    unbound = ws.sessions.issue("alice")  # how a session was made before: nothing but the cookie
    cookie = sign_in(ws, attempt("alice", "correct-horse-battery"), xsrf_on=True).cookie
    before = ws.sessions.resolve(unbound) is not None
    after = ws.sessions.resolve(cookie) is not None
    row("52.1", "stolen session cookie replayed from a plain client (no page token)",
        f"unbound session: {'signed in' if before else 'refused'}; bound: {'SIGNED IN' if after else 'refused'}",
        refused=not after)
    every = ws.sessions.resolve(cookie, page=page_token(xsrf), origin=origin)  # all the host's cookies, replayed
    row("52.1", "plain HTTP only: every cookie of the host (the XSRF one too) replayed by a server on another port",
        f"{'SIGNED IN' if every else 'refused'}: over plain HTTP the page token comes from a cookie too; behind TLS "
        "the __Host- cookie never reaches a plain port (tests/e2e/test_hostile_port_browser.py)",
        refused=every is None)
    planted_by = generate_xsrf_token_string()
    planted = sign_in(ws, attempt("mallory", "mallory-horse-battery", planted_by), xsrf_on=True).cookie
    victim = ws.sessions.resolve(planted, page=page_token(xsrf), origin=origin)
    row("52.6", "login CSRF: the attacker's session cookie planted in a victim's browser from another port",
        f"victim's page signed in as: {victim.name if victim else 'nobody'} (planting the XSRF cookie too still "
        "works over plain HTTP; behind TLS an http page cannot plant the __Host- cookie)", refused=victim is None)

    def burst(begin: bool) -> int:
        t = SignInThrottle(base_s=60)
        barrier = __import__("threading").Barrier(24)

        def guess(i: int) -> bool:
            barrier.wait()
            if begin:
                if t.begin("alice", "10.0.0.9") > 0:
                    return False
            elif t.wait_s("alice", "10.0.0.9") > 0:
                return False
            ws.accounts.verify("alice", f"wrong-{i}")  # the bcrypt check, between the two steps
            if not begin:
                t.failed("alice", "10.0.0.9")
            return True

        with ThreadPoolExecutor(24) as pool:
            return sum(pool.map(guess, range(24)))

    checked_then, checked_now = burst(False), burst(True)
    row("52.2", "24 parallel wrong passwords", f"checked: {checked_then} when checked-then-recorded, {checked_now} "
        "counted first (free: 5)", refused=checked_now <= 5)
    sign_in(ws, attempt("ghost", "wrong-password"), xsrf_on=True)
    failed = [e for e in ws.audit.entries(action="auth.sign_in_failed") if e.target == "ghost"]
    row("52.7", "a failed sign-in as 'ghost'", f"audited: {len(failed)} with address "
        f"{failed[0].detail.get('client') if failed else None}", refused=bool(failed))
    from backends.paths import StatePaths

    home, db = tmp / "s52-old", StatePaths(tmp / "s52-old").runs_db
    home.mkdir(mode=0o755)
    db.write_bytes(b"")
    db.chmod(0o644)
    modes = f"{oct(stat.S_IMODE(home.stat().st_mode))}/{oct(stat.S_IMODE(db.stat().st_mode))}"
    make_private(home)
    now = f"{oct(stat.S_IMODE(home.stat().st_mode))}/{oct(stat.S_IMODE(db.stat().st_mode))}"
    row("52.4", "PAL_HOME and runs.sqlite readable by every user", f"{modes} → {now} on start",
        refused=now == "0o700/0o600")
    live = ws.sessions.issue("alice")
    rotate_key(ws.paths.session_key)
    ended = ws.sessions.end_everyone()
    row("52.4", "a session cookie after pal users rotate-key",
        f"{ended} sessions ended; the cookie signs in: {ws.sessions.resolve(live) is not None}",
        refused=ws.sessions.resolve(live) is None)
    os.environ.pop("PAL_AUTH", None)


def stale_page_attack() -> None:
    """52.3: a click on a page left open after its account lost access (the widget values of the rerun)."""
    import asyncio

    from streamlit.proto.BackMsg_pb2 import BackMsg

    from ui.web_guard import OriginGuard, OriginPolicy, widget_ids

    back = BackMsg()
    back.rerun_script.page_name = "review"
    back.rerun_script.widget_states.widgets.add(id="$$ID-1-review_logs_3", trigger_value=True)
    reached: list[bytes] = []

    async def app(scope, receive, send) -> None:
        while (m := await receive())["type"] == "websocket.receive":
            reached.append(m["bytes"])

    for guarded in (False, True):
        inbox = [{"type": "websocket.receive", "bytes": back.SerializeToString()}, {"type": "websocket.disconnect"}]

        async def receive(inbox=inbox):
            return inbox.pop(0)

        async def send(message) -> None:
            return None

        scope = {"type": "websocket", "path": "/_stcore/stream", "client": ("127.0.0.1", 1),
                 "headers": [(b"host", b"pal.lab.example"), (b"origin", b"https://pal.lab.example")]}
        target = OriginGuard(app, policy=OriginPolicy(mode="accounts"), signed_in=lambda h: False) if guarded else app
        asyncio.run(target(scope, receive, send))
    clicks = [len(widget_ids(b) or []) for b in reached]
    row("52.3", "click on an open Review page after sign-out / demotion / removal",
        f"widget values reaching callbacks: {clicks[0]} without the front door, {clicks[1]} with it "
        "(in Chromium: tests/e2e/test_hostile_port_browser.py)", refused=clicks[1] == 0)


def markup_attacks() -> None:
    """52.6: data that loads things, as markdown would have rendered it, and as the app renders it now."""
    from markdown_it import MarkdownIt

    from ui.text import md_escape, md_inline, plain_links_markdown

    md = MarkdownIt("commonmark")
    for what, raw, render in (("guideline ![a [b] c](url)", "![a [b] c](http://evil.example/p.png)",
                               plain_links_markdown),
                              ("guideline [x [y] z](url) hiding its target", "[x [y] z](http://evil.example/a)",
                               plain_links_markdown),
                              ("requirement id in an expander label", "work-![r](http://evil.example/r.png)",
                               md_escape),
                              ("layer name in the layer filter", "![l](http://evil.example/l.png)", md_inline)):
        before, after = md.render(raw), md.render(render(raw))
        loads = lambda h: h.count("<img") + h.count("<a ")  # noqa: E731 - one expression, named for the row
        row("52.6", what, f"images/hidden links: {loads(before)} as raw markdown, {loads(after)} as rendered",
            refused=loads(after) == 0)
    from palset.models import BigFive
    from ui.charts import build_big_five_radar

    radar = build_big_five_radar(BigFive.model_validate({t: "low" for t in ("Openness", "Conscientiousness",
                                 "Extraversion", "Agreeableness", "Neuroticism")}), '<img src="http://evil.example/x">')
    row("52.6", "profile name in the Big Five radar's hover", f"plotly gets {radar.data[0].name[:24]}…",
        refused="<" not in radar.data[0].name)


def cli_and_bundle_attacks(tmp: Path) -> None:
    """52.7: a password on the command line; a NULL in a NOT NULL column logged with a traceback."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", "cli", "users", "add", "carol", "--role", "admin", "--password",
                           "shown-in-ps"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PAL_HOME": str(tmp / "cli52")})
    outcome = "ACCEPTED" if done.returncode == 0 else f"refused: {done.stderr.strip()[:60]}…"
    row("52.7", "pal users add --password (visible in the process list)", outcome, refused=done.returncode != 0)
    good = source_bundle(tmp / "b52")
    parts = edited(members(good), "memory_build_stages", lambda r: r.update(stage=None))
    path = zipped(tmp / "null52.palbundle", parts)
    records: list[logging.LogRecord] = []

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Kept()
    logging.getLogger().addHandler(handler)
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.INFO)
    try:
        why = refusal(make_workspace(tmp / "b52-target", env={"PAL_EMBEDDER": "hash"}), path)
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(level)
    tracebacks = sum(1 for r in records if r.exc_info and r.levelno >= logging.ERROR)
    row("52.7", "NULL in a NOT NULL column", f"{why[:70]} ({tracebacks} traceback(s) logged)",
        refused=tracebacks == 0 and not why.startswith(("RAW", "IMPORTED")))


def served_attacks(tmp: Path) -> None:
    """52.1 / 52.5 / 52.7 on real servers: `streamlit run app.py` (Streamlit's own door) against serve.py."""
    import urllib.error
    import urllib.request

    import websocket

    from testkit.browser import running_app
    from testkit.streamlit_client import run_page

    def status(url: str, host: str | None = None) -> int:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers={"Host": host} if host else {}),
                                        timeout=30) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return e.code

    def frames(url: str, origin: str, host: str | None = None) -> str:
        try:
            _, page = run_page(url, "home", origin=origin, host=host)
        except websocket.WebSocketBadStatusException as e:
            return f"refused ({e.status_code})"
        return f"opened, {page.count(chr(10)) + 1} frames"

    results: dict[str, dict[str, str]] = {}
    for script in ("app.py", "serve.py"):
        env = {"PAL_HOME": str(tmp / f"served-{script}"), "PAL_EMBEDDER": "hash", "PAL_AUTH": "local"}
        with running_app(env=env, script=script, timeout=120) as url:
            port = url.rsplit(":", 1)[1]
            results[script] = {
                "other port": frames(url, "http://127.0.0.1:8793"),
                "rebinding": frames(url, f"http://evil.example:{port}", f"evil.example:{port}"),
                "metrics": str(status(f"{url}/_stcore/metrics")),
            }
    for key, finding, attack in (("other port", "52.1", "websocket from a page on another port (real server)"),
                                 ("rebinding", "52.5", "DNS rebinding on make run / make present (real server)"),
                                 ("metrics", "52.7", "/_stcore/metrics without sign-in (real server)")):
        before, after = results["app.py"][key], results["serve.py"][key]
        row(finding, attack, f"streamlit run app.py: {before}; serve.py: {after}",
            refused=after.startswith("refused") or after == "404")


def main() -> None:
    logging.getLogger().setLevel(logging.CRITICAL)  # the table, not the app's log lines (they are in pal.log)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        access_attacks(tmp_path)
        if "--no-server" not in sys.argv:
            takeover_attack(tmp_path)
        bundle_attacks(tmp_path)
        other_attacks(tmp_path)
        front_door_attacks(tmp_path)
        session_attacks(tmp_path)
        stale_page_attack()
        markup_attacks()
        cli_and_bundle_attacks(tmp_path)
        if "--no-server" not in sys.argv:
            served_attacks(tmp_path)
    print(f"{len(ROWS)} attacks tried; of the second audit's {len(REFUSED)}, {sum(REFUSED)} refused and "
          f"{len(REFUSED) - sum(REFUSED)} got through")


if __name__ == "__main__":
    main()
