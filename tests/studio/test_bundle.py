"""Workspace bundles: export → import gives the same records in every table, twice adds nothing, a tampered,
foreign or future bundle is refused and leaves the target unchanged, and no configured key is in the file;
an experiment gives the same report tables there (also where the dataset lives in another folder), goes into a
bundle only whole, and its units in progress arrive inert.

Uses the bundled demo users (``data/demo``) with the hash embedder and scripted LLMs (``testkit.worked``)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from palset.dataset import dataset_key
from palset.loader import load_dataset
from protocol.config import ExperimentConfig
from protocol.report import build_report, fair_rows, single_rows
from studio.bundle.export import dataset_spellings, export_bundle
from studio.bundle.importer import BundleError, import_bundle, read_bundle
from studio.bundle.kinds import BY_TABLE, KINDS, Configured
from studio.bundle.manifest import MANIFEST, table_member
from testkit.worked import ANNOTATORS, fill_home, worked_experiment
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


def table_rows(ws, kind, mapping: dict[str, str] | None = None, *, carried: bool = False) -> list:
    """Every row of a kind's table (surrogate ids left out), JSON parsed, sorted, ids optionally mapped;
    ``carried``: without the LLM calls accounted to no record (an experiment's single-turn tasks), which no
    bundle carries."""
    columns = [c for c in ws.tables.columns(kind.table) if c not in kind.skip]
    rows = ws.tables.select(kind.table, columns)
    if carried and kind.table == "llm_calls":
        rows = [r for r in rows if r["run_id"] is not None]
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
        assert manifest.tables[kind.table].rows == len(table_rows(ws, kind, carried=True))
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
        assert table_rows(target, kind) == table_rows(ws, kind, carried=True), kind.table


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
    from evaluation.fidelity.service import reference_key
    from evaluation.fidelity.types import FidelityConfig

    ref = target.fidelity.get(reference_key(new, USERS[0], "ref:gold", "hash", FidelityConfig()))
    assert ref is not None and ref.dataset == new and ref.headline.text_f1 == 1.0  # reference rows re-keyed too
    ids = {}  # the same records, up to the new keys
    for kind in KINDS:
        if kind.rekey is not None:
            for a, b in zip(ws.tables.select(kind.table, list(kind.key)), target.tables.select(kind.table, list(kind.key))):
                ids[a[kind.key[0]]] = b[kind.key[0]]
    for kind in KINDS:
        assert table_rows(target, kind) == table_rows(ws, kind, {old: new, **ids}, carried=True), kind.table


def _rewrite(src: Path, dst: Path, edit) -> Path:
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    edit(members)
    with zipfile.ZipFile(dst, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return dst


def _tamper_row(members):
    """One letter of a stored utterance changed (its row's checksum no longer fits)."""
    name = table_member("sim_turns")
    data = members[name]
    at = re.search(rb'content\\?":\s*\\?"', data)
    assert at is not None, "no utterance text in the bundle's sim_turns"
    i = at.end()
    members[name] = data[:i] + (b"Y" if data[i:i + 1] == b"Z" else b"Z") + data[i + 1:]


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
    fill_home(target, load_dataset(DEMO), ["1001"], ("gold", "rag-turn"), review=False, fidelity=False,
              experiment=False)
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


def experiment_tables(ws) -> list[tuple]:
    """Per experiment job (the Evaluate page's list): its dataset folder and the report's tables and unit counts,
    rebuilt from its units and the eval store as the page does."""
    out = []
    for job in ws.jobs.store.jobs(kind="experiment"):
        exp = ExperimentConfig.model_validate(ws.jobs.store.config(job.job_id)["experiment"])
        report = build_report(exp, ws.jobs.store.units(job.job_id), ws.evals)
        out.append((job.job_id, exp.dataset, single_rows(report), fair_rows(report), report.units))
    return out


def test_an_experiment_reports_the_same_tables_after_import(source, tmp_path):
    ws, _, out, manifest = source
    assert manifest.tables["jobs"].rows == 1 and manifest.tables["job_units"].rows == 14
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    import_bundle(target, out, known={"demo": DEMO})
    (job, folder, *tables), = experiment_tables(ws)
    assert experiment_tables(target) == [(job, dataset_key(DEMO), *tables)]
    single, fair, units = tables
    assert units == {"done": 14} and [r[0] for r in single[1]] == ["gold", "vanilla"]
    assert sorted(r[2] for r in fair[1]) == ["preference", "requirement"]
    assert all(int(r[3]) + int(r[4]) + int(r[5]) == 1 for r in fair[1])  # one topic judged per aspect
    assert target.jobs.store.summary(job).pool == "cli"
    with zipfile.ZipFile(out) as z:  # the exporting machine's folder is in no experiment member
        assert not any(dataset_key(DEMO).encode() in z.read(table_member(t)) for t in ("jobs", "job_units"))


def test_an_experiment_on_a_dataset_in_another_folder_is_the_same_experiment_there(source, tmp_path):
    """Its configuration names that home's folder, its job id is the one ``pal experiment run FILE`` derives
    there, and its units read the re-keyed builds, runs, results and judgments: the same tables."""
    ws, dataset, out, _ = source
    moved = tmp_path / "elsewhere" / "demo"
    shutil.copytree(DEMO, moved)
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    import_bundle(target, out, known={"demo": moved})
    (_, _, *tables), = experiment_tables(ws)
    job = worked_experiment(load_dataset(moved), USERS[0], "gold").job_id()
    assert experiment_tables(target) == [(job, dataset_key(moved), *tables)]
    units = target.jobs.store.units(job)
    assert {u.payload["dataset"] for u in units} == {dataset_key(moved)}
    assert all(d.startswith(f"{job}/") for u in units for d in u.deps) and any(u.deps for u in units)
    sims = [u for u in units if u.kind == "sim.run"]
    assert sims and all(target.sims.exists(u.label) and u.unit_id == f"{job}/sim/{u.label}" for u in sims)


def test_an_experiment_goes_into_a_bundle_only_whole(source, tmp_path):
    """The worked experiment is gold against vanilla for user 1000: a bundle without one of those leaves it out."""
    ws, dataset, _, _ = source
    for users, methods, rows in ((["1002"], None, 0), (None, ["gold", "rag-turn"], 0), (["1000"], None, 1),
                                 (USERS, ["gold", "vanilla"], 1)):
        manifest = export_bundle(ws, dataset, tmp_path / "part.palbundle", users=users, methods=methods)
        assert manifest.tables["jobs"].rows == rows, (users, methods)
        assert manifest.tables["job_units"].rows == 14 * rows and manifest.tables["job_deps"].rows == 13 * rows


def test_an_experiment_of_another_dataset_is_not_exported(source, tmp_path):
    ws, dataset, _, _ = source
    other = tmp_path / "other" / "demo"
    shutil.copytree(DEMO, other)
    manifest = export_bundle(ws, load_dataset(other), tmp_path / "other.palbundle")
    assert manifest.tables["jobs"].rows == 0 and manifest.tables["job_units"].rows == 0


def test_a_unit_in_progress_arrives_queued_without_its_lease_and_nothing_runs(source, tmp_path):
    ws, dataset, _, _ = source
    job = ws.jobs.store.jobs(kind="experiment")[0].job_id
    unit = ws.jobs.store.units(job)[-1]
    with ws.db.write() as conn:
        conn.execute("UPDATE job_units SET status='running', lease_owner='elsewhere:1:x', lease_until=9e9 "
                     "WHERE unit_id=?", (unit.unit_id,))
    try:
        export_bundle(ws, dataset, tmp_path / "busy.palbundle")
    finally:
        with ws.db.write() as conn:
            conn.execute("UPDATE job_units SET status='done', lease_owner=NULL, lease_until=NULL WHERE unit_id=?",
                         (unit.unit_id,))
    carried = {r["unit_id"]: r for r in read_bundle(tmp_path / "busy.palbundle").rows["job_units"]}[unit.unit_id]
    assert (carried["status"], carried["lease_owner"], carried["lease_until"]) == ("queued", None, None)
    assert carried["attempts"] == unit.attempts - 1
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    import_bundle(target, tmp_path / "busy.palbundle", known={"demo": DEMO})
    assert target.jobs.store.claim("app-worker", 60, pool="app") is None  # the app's workers take nothing
    assert target.jobs.store.unit(unit.unit_id).status == "queued"
    assert experiment_tables(target)[0][4] == {"done": 13, "queued": 1}


def test_an_experiment_of_every_user_needs_every_user_and_its_folder_is_hidden_however_written():
    scope = BY_TABLE["jobs"].scope
    assert isinstance(scope, Configured)
    folder = str(DEMO / ".." / "demo")  # as an experiment file may name it: not the key
    row = {"kind": "experiment", "config": json.dumps({"experiment": {"dataset": folder, "users": "all",
                                                                      "methods": ["gold"], "baseline": "vanilla"}})}
    dkey, every = dataset_key(DEMO), ["1000", "1002"]
    assert scope.covers(row, dkey, None, None, every)
    assert scope.covers(row, dkey, every, ["gold", "vanilla", "rag-turn"], every)
    assert not scope.covers(row, dkey, ["1000"], None, every)
    assert not scope.covers(row, dkey, None, ["gold"], every)
    assert not scope.covers(row, dataset_key(DEMO.parent), None, None, every)
    assert dataset_spellings({"jobs": [row]}, dkey) == {folder}


def _without_columns(members, drop=("tokens_cached", "tokens_processed"), add=None):
    """The llm_calls table as a bundle made before those columns existed (or, with ``add``, one with a column this
    install does not have), checksums redone."""
    manifest = json.loads(members[MANIFEST])
    info, name = manifest["tables"]["llm_calls"], table_member("llm_calls")
    info["columns"] = [c for c in info["columns"] if c not in drop] + ([add] if add else [])
    info["migrations"] = [m for m in info["migrations"] if m != 28]
    rows = [json.loads(line) for line in members[name].decode().splitlines() if line]
    members[name] = "".join(json.dumps({**{c: v for c, v in r.items() if c not in drop}, **({add: 1} if add else {})},
                                       ensure_ascii=False) + "\n" for r in rows).encode()
    manifest["members"][name] = {**manifest["members"][name], "sha256": hashlib.sha256(members[name]).hexdigest(),
                                 "bytes": len(members[name])}
    members[MANIFEST] = json.dumps(manifest).encode()


def test_a_bundle_made_before_the_cached_token_columns_imports_with_them_empty(source, tmp_path):
    ws, _, out, _ = source
    older = _rewrite(out, tmp_path / "older.palbundle", _without_columns)
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    import_bundle(target, older, known={"demo": DEMO})
    calls = target.tables.select("llm_calls", ["run_id", "tokens_in", "tokens_cached", "tokens_processed"])
    assert calls and all(c["tokens_cached"] is None and c["tokens_processed"] is None for c in calls)
    assert len(calls) == len([r for r in ws.tables.select("llm_calls", ["run_id"]) if r["run_id"] is not None])
    foreign = _rewrite(out, tmp_path / "foreign.palbundle", lambda m: _without_columns(m, drop=(), add="mystery"))
    with pytest.raises(BundleError, match="columns .* differ from this install's"):
        import_bundle(make_workspace(tmp_path / "t2", env={"PAL_EMBEDDER": "hash"}), foreign, known={"demo": DEMO})


def test_an_older_reference_report_keeps_its_own_versions_key(tmp_path):
    """A reference report measured under an older fidelity definition is imported under the key of the versions it
    was measured with, so the lookup of today's report misses it (and measures again) instead of reading it as
    current."""
    from backends.embeddings import load_embedder
    from evaluation.fidelity.service import reference_key, reference_reports
    from evaluation.fidelity.types import FidelityConfig

    ws = make_workspace(tmp_path / "source", env={"PAL_EMBEDDER": "hash"})
    dataset = load_dataset(DEMO)
    report = reference_reports(dataset, dataset_key(DEMO), dataset.users[USERS[0]], load_embedder("hash"), None,
                               names=("ref:empty",))[0]
    report.metric_version = "2"  # as measured under the previous definition
    old_key = reference_key(report.dataset, report.user_id, report.method, report.embedder, report.config,
                            metric_version="2")
    ws.fidelity.save(report.model_copy(update={"fidelity_key": old_key}))
    out = tmp_path / "old.palbundle"
    export_bundle(ws, dataset, out, how=["made by a test"])
    target = make_workspace(tmp_path / "target", env={"PAL_EMBEDDER": "hash"})
    import_bundle(target, out, known={"demo": DEMO})
    current = reference_key(report.dataset, report.user_id, report.method, report.embedder, FidelityConfig())
    assert target.fidelity.get(current) is None  # today's lookup misses the older report: it is measured again
    assert target.fidelity.get(old_key) is not None  # kept, under its own versions
