"""Workspace bundles: export → import gives the same records in every table, twice adds nothing, a tampered,
foreign or future bundle is refused and leaves the target unchanged, and no configured key is in the file.

Uses the bundled demo users (``data/demo``) with the hash embedder and scripted LLMs (``testkit.worked``)."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from palset.dataset import dataset_key
from palset.loader import load_dataset
from studio.bundle.export import export_bundle
from studio.bundle.importer import BundleError, import_bundle, read_bundle
from studio.bundle.kinds import KINDS
from studio.bundle.manifest import MANIFEST, table_member
from testkit.worked import ANNOTATORS, fill_home
from testkit.workspace import make_workspace
from tests.conftest import DEMO

KEY = "sk-live-THISMUSTNEVERLEAVE-0123456789"
USERS = ["1000", "1002"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A home with every record kind for two demo users (gold, rag-turn), a key set in its configuration."""
    home = tmp_path_factory.mktemp("source")
    mp = pytest.MonkeyPatch()
    mp.setenv("PAL_EMBEDDER", "hash")
    ws = make_workspace(home / "pal", env={"PAL_EMBEDDER": "hash", "PAL_DEFAULT_API_KEY": KEY,
                                           "PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_MODEL": "gpt-test",
                                           "PAL_DEFAULT_BASE_URL": "https://user:pw@llm.lab.example/v1"})
    dataset = load_dataset(DEMO)
    fill_home(ws, dataset, USERS)
    out = home / "work.palbundle"
    manifest = export_bundle(ws, dataset, out, how=["made by a test"])
    yield ws, dataset, out, manifest
    mp.undo()


def table_rows(ws, kind, mapping: dict[str, str] | None = None) -> list:
    """Every row of a kind's table (surrogate ids left out), JSON parsed, sorted, ids optionally mapped."""
    columns = [c for c in ws.tables.columns(kind.table) if c not in kind.skip]
    rows = ws.tables.select(kind.table, columns)
    text = json.dumps([{c: json.loads(r[c]) if c in kind.json else r[c] for c in columns} for r in rows],
                      sort_keys=True, ensure_ascii=False)
    for old, new in (mapping or {}).items():
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    return sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in json.loads(text))


def snapshot(ws) -> dict[str, list]:
    return {k.table: table_rows(ws, k) for k in KINDS} | {"bundle_imports": ws.tables.imports()}


def test_every_kind_is_in_the_bundle_with_a_manifest_that_checks(source):
    ws, _, out, manifest = source
    assert {k.table for k in KINDS} == set(manifest.tables)
    empty = [t for t, info in manifest.tables.items() if info.rows == 0]
    assert empty == [], f"the worked home lacks records of {empty}"
    for kind in KINDS:  # counts per table: all of the source's rows (the source holds only this dataset's work)
        assert manifest.tables[kind.table].rows == len(table_rows(ws, kind))
    assert manifest.how == ["made by a test"] and manifest.schema_versions
    assert {m.model for m in manifest.made_with} >= {"scripted-judge"}
    bundle = read_bundle(out)
    assert bundle.manifest == manifest and bundle.prompts


def test_import_into_an_empty_home_gives_the_same_records(source, tmp_path):
    ws, dataset, out, _ = source
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    report = import_bundle(target, out, known={"demo": DEMO})
    assert report.total_added > 0 and not report.already_imported
    for kind in KINDS:
        assert table_rows(target, kind) == table_rows(ws, kind), kind.table


def test_importing_twice_adds_nothing(source, tmp_path):
    _, _, out, _ = source
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    import_bundle(target, out, known={"demo": DEMO})
    before = snapshot(target)
    again = import_bundle(target, out, known={"demo": DEMO})
    assert again.already_imported and again.total_added == 0
    assert snapshot(target) == before


def test_a_dataset_in_another_folder_is_rekeyed_and_its_records_open_there(source, tmp_path):
    """On another machine the dataset's key (its resolved path) differs: every id derived from it is made
    again, so that home finds the records where it would have put its own (same builds, runs, judgments)."""
    ws, dataset, out, _ = source
    moved = tmp_path / "elsewhere" / "demo"
    shutil.copytree(DEMO, moved)
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    import_bundle(target, out, known={"demo": moved})
    there = load_dataset(moved)
    old, new = dataset_key(DEMO), dataset_key(moved)
    assert target.sims.list(dataset=new) and not target.sims.list(dataset=old)
    builder = target.open_builder(there, USERS[0], "gold")
    assert builder.latest_stage() == builder.total_stages - 1  # the imported build, not a new empty one
    source_builder = ws.open_builder(dataset, USERS[0], "gold")
    assert builder.store.items_as_of(builder.build_id, 5) == source_builder.store.items_as_of(source_builder.build_id, 5)
    trace = builder.retrieve("sleep after night shifts", "requirement", there.users[USERS[0]].query[0])
    assert trace.items  # vectors rebuilt from the items on first use
    spec = target.sims.load(target.sims.list(dataset=new)[0]["run_id"]).spec
    from sim.store import run_id_for

    assert target.sims.exists(run_id_for(spec))
    judgments = target.evals.judgments(dataset=new)
    assert judgments and all(target.sims.exists(j.run_a) and target.sims.exists(j.run_b) for j in judgments)
    ids = {}  # the same records, up to the new keys
    for kind in KINDS:
        if kind.rekey is not None:
            for a, b in zip(ws.tables.select(kind.table, list(kind.key)), target.tables.select(kind.table, list(kind.key))):
                ids[a[kind.key[0]]] = b[kind.key[0]]
    for kind in KINDS:
        assert table_rows(target, kind) == table_rows(ws, kind, {old: new, **ids}), kind.table


def _rewrite(src: Path, dst: Path, edit) -> Path:
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    edit(members)
    with zipfile.ZipFile(dst, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return dst


def _tamper_row(members):
    name = table_member("sim_turns")
    members[name] = members[name].replace(b"I could use", b"I would use", 1)


def _future_schema(members):
    manifest = json.loads(members[MANIFEST])
    manifest["tables"]["judgments"]["migrations"] = [4, 999]
    members[MANIFEST] = json.dumps(manifest).encode()


def _future_format(members):
    manifest = json.loads(members[MANIFEST])
    manifest["format_version"] = 99
    members[MANIFEST] = json.dumps(manifest).encode()


def _unknown_kind(members):
    manifest = json.loads(members[MANIFEST])
    manifest["tables"]["experiments"] = {**manifest["tables"]["judgments"], "rows": 0}
    manifest["members"][table_member("experiments")] = {"sha256": hashlib.sha256(b"").hexdigest(), "bytes": 0,
                                                        "rows": 0}
    members[table_member("experiments")] = b""
    members[MANIFEST] = json.dumps(manifest).encode()


def _foreign_users(members):
    manifest = json.loads(members[MANIFEST])
    manifest["dataset"]["users"]["1000"] = "0" * 12  # another dataset's user 1000
    members[MANIFEST] = json.dumps(manifest).encode()


@pytest.mark.parametrize("edit, message", [
    (_tamper_row, "checksum mismatch"),
    (_future_schema, "schema version"),
    (_future_format, "format version 99"),
    (_unknown_kind, "unknown to this PAL Studio"),
    (_foreign_users, "not the one the records were made on"),
])
def test_a_tampered_or_foreign_bundle_is_refused_and_leaves_the_target_unchanged(source, tmp_path, edit, message):
    _, _, out, _ = source
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    fill_home(target, load_dataset(DEMO), ["1001"], ("gold", "rag-turn"), review=False, fidelity=False)
    before = snapshot(target)
    bad = _rewrite(out, tmp_path / "bad.palbundle", edit)
    with pytest.raises(BundleError, match=message):
        import_bundle(target, bad, known={"demo": DEMO})
    assert snapshot(target) == before


def test_a_bundle_for_a_dataset_that_is_not_here_is_refused(source, tmp_path):
    _, _, out, _ = source
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    before = snapshot(target)
    with pytest.raises(BundleError, match="'demo'.*not present here.*--dataset PATH"):
        import_bundle(target, out, known={"mine": tmp_path})
    assert snapshot(target) == before


def test_a_failure_inside_the_merge_rolls_everything_back(source, tmp_path, monkeypatch):
    """A row the database rejects half-way (here: an orphan child) undoes every row inserted before it."""
    _, _, out, _ = source
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    before = snapshot(target)
    import studio.bundle.importer as importer

    real = importer.plan_import

    def broken(bundle, key):
        steps = real(bundle, key)
        turns = next(s for s in steps if s.table == "sim_turns")
        turns.rows[-1]["side"] = None  # NOT NULL: fails after builds, items and runs went in
        return steps

    monkeypatch.setattr(importer, "plan_import", broken)
    with pytest.raises(Exception, match="NOT NULL"):
        import_bundle(target, out, known={"demo": DEMO})
    assert snapshot(target) == before


def test_no_key_and_no_url_credentials_in_the_file(source):
    _, _, out, _ = source
    raw = out.read_bytes()
    with zipfile.ZipFile(out) as z:
        texts = [z.read(n) for n in z.namelist()]
    for blob in [raw, *texts]:
        assert KEY.encode() not in blob and b"user:pw@" not in blob
    assert not any(b"password_hash" in t or b"review_accounts" in t for t in texts)


def test_pseudonymised_export_replaces_every_annotator_name(source, tmp_path):
    ws, dataset, _, _ = source
    out = tmp_path / "anon.palbundle"
    manifest = export_bundle(ws, dataset, out, pseudonymise_people=True)
    with zipfile.ZipFile(out) as z:
        text = b"".join(z.read(n) for n in z.namelist()).decode()
    assert manifest.selection.pseudonymised
    for name in (*ANNOTATORS, "carol.researcher"):
        assert name not in text
    assert '"annotator-1"' in text and '"person-1"' in text


def test_users_and_methods_narrow_the_export(source, tmp_path):
    ws, dataset, _, _ = source
    manifest = export_bundle(ws, dataset, tmp_path / "one.palbundle", users=["1002"], methods=["gold"])
    assert manifest.methods == {"gold": 1} and set(manifest.dataset.users) <= {"1002"}
    assert manifest.tables["judgments"].rows == 0  # a judgment needs both of its methods
    with pytest.raises(ValueError, match="no user"):
        export_bundle(ws, dataset, tmp_path / "x.palbundle", users=["9999"])
