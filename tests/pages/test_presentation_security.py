"""Presenting on a shared server (audit findings 8, 14–17): a refused bundle gives a message, not a broken session
(with ``PAL_PRESENT``, an error page for everyone); presenting shows neither this server's accounts nor its audit
log; annotators get no provenance (method names, judges); the bundle's claims are checked against its records; a
presentation writes nothing into its home and unused presentations and refused uploads are removed."""

from __future__ import annotations

import json
import os
import time
import zipfile

import pytest

from backends.paths import StatePaths
from palset.loader import load_dataset
from studio.bundle.manifest import MANIFEST
from studio.presentation import bundle_sha256, clean_presentations, open_presentation, presentation_home
from testkit.worked import make_tour_bundle
from testkit.workspace import make_workspace
from tests.conftest import DEMO
from tests.pages.apptest import CookieJar, all_markdown, app_workspace, open_page

JAR = CookieJar()


@pytest.fixture(scope="module")
def tour_bundle(tmp_path_factory):
    home = tmp_path_factory.mktemp("tour")
    out = home / "tour.palbundle"
    mp = pytest.MonkeyPatch()
    mp.setenv("PAL_EMBEDDER", "hash")
    make_tour_bundle(home / "src", load_dataset(DEMO), out)
    mp.undo()
    return out


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    return tmp_path


def claiming(src, dst, model: str):
    """``src`` with a manifest claiming a judge model that made nothing in it (the manifest is not checksummed)."""
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(members[MANIFEST])
    manifest["made_with"].append({"role": "judge", "provider": "openai", "endpoint": "https://api.openai.com/v1",
                                  "model": model, "calls": 999, "records": {"judgments": 50}})
    members[MANIFEST] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in members.items():
            z.writestr(n, data)
    return dst


def provenance(at) -> str:
    return "\n".join(m.value for e in at.expander if e.label == "Where these records came from" for m in e.markdown)


def test_a_claim_no_record_shows_is_labelled_as_the_bundles_claim(home, monkeypatch, tour_bundle):
    """Audit finding 16: the manifest's "made with" was shown as fact."""
    monkeypatch.setenv("PAL_PRESENT", str(claiming(tour_bundle, home / "claims.palbundle", "gpt-9-imaginary")))
    text = provenance(open_page("home"))
    made = [line for line in text.splitlines() if line.startswith("- Made with")]
    assert made and not any("imaginary" in line for line in made)
    assert "The bundle also claims, with no record here to show it: judge: **gpt\\-9\\-imaginary**" in text
    assert "scripted\\-judge" in "\n".join(made)  # the judge the judgments name is shown as made


def test_annotators_see_no_provenance_and_nobody_sees_accounts_or_the_audit_log(home, monkeypatch, tour_bundle):
    """Findings 15 (the banner named methods and the judge to annotators) and 14 (presenting showed this server's
    accounts, with e-mails, and its audit log)."""
    monkeypatch.setenv("PAL_AUTH", "accounts")
    monkeypatch.setenv("PAL_PRESENT", str(tour_bundle))
    JAR.install(monkeypatch)
    from ui.platform_state import home_workspace

    accounts = home_workspace().accounts  # the home's accounts (app_workspace() is the presented bundle's)
    accounts.add("boss", "admin", "correct-horse", email="boss@lab.example")
    accounts.add("ann", "annotator", "correct-horse")
    JAR.sign_in("ann")
    at = open_page("review")
    assert "Presentation: read" in all_markdown(at) and not provenance(at)
    text = all_markdown(at) + "\n".join(e.label for e in at.expander)
    for secret in ("scripted", "SmolLM2", "gold", "rag\\-turn", "Where these records came from"):
        assert secret not in text, secret
    JAR.sign_in("boss")
    at = open_page("review")
    assert "Accounts" not in [t.label for t in at.tabs] and provenance(at)
    assert "boss@lab.example" not in all_markdown(at)
    at = open_page("audit")
    assert any("not offered while presenting" in i.value for i in at.info) and not at.dataframe


def test_pal_present_with_a_refused_bundle_shows_an_error_page(home, monkeypatch):
    """Finding 8: with PAL_PRESENT naming a hostile file every session broke; now each gets a page saying why."""
    bad = home / "hostile.palbundle"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr(MANIFEST, b"[" * 100_000 + b"]" * 100_000)
    monkeypatch.setenv("PAL_PRESENT", str(bad))
    for page in ("home", "users"):
        at = open_page(page)
        assert [e.value for e in at.error] and "hostile.palbundle: refused: manifest.json: JSON nested too deeply" in \
            at.error[0].value.replace("\\", "")
        assert not at.title and not at.sidebar.selectbox and str(home) not in at.error[0].value


def test_a_refused_upload_is_reported_deleted_and_the_session_goes_on(home, monkeypatch):
    from ui.platform_state import PRESENT_KEY

    at = open_page("home")
    uploads = app_workspace().paths.uploads
    uploads.mkdir(parents=True, exist_ok=True)
    bad = uploads / "0123456789abcdef0123.palbundle"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    at.session_state[PRESENT_KEY] = str(bad)
    at.run()
    assert not at.exception and "refused: not a PAL Studio bundle" in "\n".join(e.value for e in at.error).replace(
        "\\", "")
    assert not bad.exists()
    at.run()  # the session goes on, not presenting
    assert not at.exception and not at.error and at.title[0].value == "PAL Studio"


def test_a_presentation_writes_nothing_into_its_home(home, tour_bundle):
    """Finding 17: presenting wrote Chroma and response-cache files into the presentation's home."""
    base = make_workspace(home / "pal", env={"PAL_EMBEDDER": "hash"})
    ws = open_presentation(base, tour_bundle, known={"demo": DEMO})
    folder = presentation_home(base.home, bundle_sha256(tour_bundle))
    before = sorted(p.relative_to(folder) for p in folder.rglob("*") if not p.name.endswith(("-wal", "-shm")))
    dataset = load_dataset(DEMO)
    builder = ws.open_builder(dataset, "1002", "rag-turn")
    trace = builder.retrieve("What should I cook tonight?", "requirement")  # embeds the build's items: in memory only
    assert trace.items
    after = sorted(p.relative_to(folder) for p in folder.rglob("*") if not p.name.endswith(("-wal", "-shm")))
    assert after == before and "cache.sqlite" not in {p.name for p in after} and "chroma" not in str(after)


def test_unused_presentations_uploads_and_interrupted_imports_are_removed(tmp_path):
    paths = StatePaths(tmp_path)
    old, kept, fresh = (paths.presentations / n for n in ("a" * 20, "b" * 20, "c" * 20))
    for folder in (old, kept, fresh):
        folder.mkdir(parents=True)
        StatePaths(folder).imported.write_text("{}")
    partial = paths.presentations / ("d" * 20 + ".partial")
    partial.mkdir()
    paths.uploads.mkdir(parents=True)
    stale_upload, kept_upload = paths.uploads / ("e" * 20 + ".palbundle"), paths.uploads / ("b" * 20 + ".palbundle")
    stale_upload.write_bytes(b"x")
    kept_upload.write_bytes(b"x")
    week_ago = time.time() - 8 * 86400
    for p in (StatePaths(old).imported, StatePaths(kept).imported, stale_upload, kept_upload, partial):
        os.utime(p, (week_ago, week_ago))
    removed = clean_presentations(tmp_path, keep=["b" * 64])
    assert set(removed) == {old, partial, stale_upload}
    assert kept.is_dir() and fresh.is_dir() and kept_upload.is_file()
