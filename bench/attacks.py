"""Every attack of the security audit (commit f85593f) tried against this code, one line each: what was tried and
what happened. Run: ``.venv/bin/python bench/attacks.py`` (``--no-server`` skips the one that starts the app).

Findings the page tests cover through the running app (AppTest) are named with their test instead of being
re-enacted here: 6, 14, 15, 16, 17, 23 (see ``tests/pages/test_review_page.py``, ``test_presentation_security.py``,
``test_generate.py``).
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


def row(finding: str, attack: str, outcome: str) -> None:
    ROWS.append((finding, attack, outcome))
    print(f"{finding:>4} | {attack} | {outcome}", flush=True)


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


def main() -> None:
    logging.getLogger().setLevel(logging.CRITICAL)  # the table, not the app's log lines (they are in pal.log)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        access_attacks(tmp_path)
        if "--no-server" not in sys.argv:
            takeover_attack(tmp_path)
        bundle_attacks(tmp_path)
        other_attacks(tmp_path)
    print(f"{len(ROWS)} attacks tried")


if __name__ == "__main__":
    main()
