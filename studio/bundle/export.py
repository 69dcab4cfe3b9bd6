"""``pal workspace export``: one dataset's work in one file (see :mod:`studio.bundle.manifest` for the layout).

Rows are read through the workspace's :class:`backends.store.tables.TableStore` per record kind
(:mod:`studio.bundle.kinds`; experiments only whole, units in progress made inert — see there), the dataset's
key (a path on this machine, and the folder as an experiment file wrote it) is replaced by a placeholder,
people's names by pseudonyms when asked, URL credentials masked. Accounts, password hashes, the audit log,
leases and the response cache are never read. Every configured secret (API keys, ``secrets.toml`` values)
is looked for in every member before the file is written; one found is replaced and named in the notes.
"""

from __future__ import annotations

import io
import json
import logging
import os
import zipfile
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from backends.config import PlatformConfig, mask_url, read_secrets
from backends.prompts import PromptError, load_prompt
from backends.store.tables import TableStore
from palset.dataset import Dataset, dataset_key
from palset.names import name_of
from studio.bundle.kinds import BUILDS, BY_TABLE, KINDS, Configured, Own, Row
from studio.bundle.manifest import (
    MANIFEST,
    PROMPTS,
    MadeWith,
    Manifest,
    Member,
    Selection,
    TableInfo,
    dataset_info,
    pal_studio_version,
    sha256,
    table_member,
)
from studio.bundle.rewrite import DATASET_TOKEN, Rewriter, people_names, pseudonym_map, pseudonymise

if TYPE_CHECKING:
    from studio.workspace import Workspace

log = logging.getLogger(__name__)
REDACTED = "[redacted]"
ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed member times: the same records give the same members


def select_rows(tables: TableStore, dkey: str, users: Sequence[str] | None,
                methods: Sequence[str] | None, dataset_users: Collection[str] = ()) -> dict[str, list[Row]]:
    """Every exported row per table, in registry order (parents before children); ``dataset_users``: every
    user of the dataset (what an experiment of ``users = "all"`` names)."""
    out: dict[str, list[Row]] = {}
    for kind in KINDS:
        columns = [c for c in tables.columns(kind.table) if c not in kind.skip]
        where: dict[str, Iterable[object]] = {}
        if isinstance(kind.scope, Configured):
            config = kind.scope
            out[kind.table] = [r for r in tables.select(kind.table, columns, {config.kind_column: [config.kind]})
                               if config.covers(r, dkey, users, methods, dataset_users)]
            continue
        if isinstance(kind.scope, Own):
            scope = kind.scope
            if scope.dataset:
                keys = {dkey, *(str(r[c]) for t, c in scope.also for r in out.get(t, []))}
                where[scope.dataset] = sorted(keys)
            if scope.user and users is not None:
                where[scope.user] = list(users)
            for column in scope.methods if methods is not None else ():
                where[column] = [*(methods or []), *scope.always]
        else:
            where[kind.scope.column] = sorted({str(r[BY_TABLE[t].key[0]]) for t in kind.scope.parents
                                               for r in out.get(t, [])})
        out[kind.table] = tables.select(kind.table, columns, where)
    return out


def dataset_spellings(rows: dict[str, list[Row]], dkey: str) -> set[str]:
    """The exported dataset's folder as the selected configurations write it, where that is not its key (an
    experiment file's path, unresolved): hidden like the key, so the target reads its own folder there."""
    found = {kind.scope.dataset_of(r) for kind in KINDS if isinstance(kind.scope, Configured)
             for r in rows.get(kind.table, [])}
    return {f for f in found if f is not None and f != dkey}


def made_with(rows: dict[str, list[Row]], tables: TableStore) -> list[MadeWith]:
    """Which endpoints and models made the exported records: the LLM calls of the builds, runs and judgments;
    for records without calls of their own (judgments made before their calls were accounted to them,
    single-turn results) the model they name, with the endpoint of this home's calls of that model."""
    kind_of = {**{r["build_id"]: "memory builds" for r in rows.get(BUILDS, [])},
               **{r["run_id"]: "simulation runs" for r in rows.get("sim_runs", [])},
               **{r["judgment_key"]: "judgments" for r in rows.get("judgments", [])}}
    groups: dict[tuple[str, str, str, str], MadeWith] = {}
    seen: dict[tuple[str, str, str, str], set[str]] = {}
    for call in rows.get("llm_calls", []):
        key = (str(call["role"]), str(call["provider"]), mask_url(str(call["endpoint"])) or "", str(call["model"]))
        entry = groups.setdefault(key, MadeWith(role=key[0], provider=key[1], endpoint=key[2], model=key[3]))
        entry.calls += 1
        seen.setdefault(key, set()).add(str(call["run_id"]))
    for key, run_ids in seen.items():
        for run_id in run_ids:
            what = kind_of.get(run_id, "other")
            groups[key].records[what] = groups[key].records.get(what, 0) + 1
    out = list(groups.values())
    covered = {run_id for ids in seen.values() for run_id in ids}
    for table, key_col, role, column, label in (
            ("judgments", "judgment_key", "judge", "judge_model", "judgments"),
            ("bench_results", "result_key", "assistant", "model", "single-turn results")):
        counts: dict[str, int] = {}
        for r in rows.get(table, []):
            if r[key_col] not in covered:
                counts[str(r[column])] = counts.get(str(r[column]), 0) + 1
        for model, n in sorted(counts.items()):
            calls = tables.select("llm_calls", ["provider", "endpoint"], {"role": [role], "model": [model]})
            endpoints = sorted({(str(c["provider"]), mask_url(str(c["endpoint"])) or "") for c in calls}) or [("", "")]
            out.append(MadeWith(role=role, provider=endpoints[0][0], endpoint=endpoints[0][1], model=model,
                                records={label: n}))
    return out


def collect_prompts(rows: dict[str, list[Row]]) -> list[dict]:
    """The prompts the records name, with their versions, and the text where this install has that version."""
    wanted: set[tuple[str, str]] = set()
    for kind in KINDS:
        if kind.prompts is not None:
            for row in rows.get(kind.table, []):
                wanted.update(kind.prompts(row))
    out = []
    for name, version in sorted(wanted):
        try:
            prompt = load_prompt(name)
        except PromptError as e:
            log.warning("bundle: prompt %s v%s not in this install: %s", name, version, e)
            out.append({"name": name, "version": version, "text": None, "note": "not in this install"})
            continue
        same = prompt.version == version
        out.append({"name": name, "version": version, "text": prompt.text if same else None,
                    **({} if same else {"note": f"this install has version {prompt.version}"})})
    return out


def configured_secrets(config: PlatformConfig, env: dict[str, str] | None = None) -> list[str]:
    """Every secret this install knows: role API keys, ``secrets.toml`` values under a key/secret/password/token
    name (e.g. ``[auth]``), ``PAL_*_API_KEY`` variables. Short values (< 6 characters) are not looked for."""
    found = [r.api_key.get_secret_value() for r in config.roles.values() if r.api_key]
    env = dict(os.environ) if env is None else env
    found += [v for k, v in env.items() if k.startswith("PAL_") and k.endswith("API_KEY")]

    def walk(node: object, secret: bool) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, secret or any(w in str(k).lower() for w in ("key", "secret", "password", "token")))
        elif isinstance(node, str) and secret:
            found.append(node)

    try:
        walk(read_secrets(), False)
    except Exception:  # an unreadable secrets.toml has no secret to look for; the config error is shown elsewhere
        log.exception("secrets.toml unreadable while collecting secrets to keep out of a bundle")
    return sorted({s for s in found if len(s) >= 6}, key=len, reverse=True)


def _redact(text: str, secrets: list[str]) -> tuple[str, int]:
    hits = 0
    for secret in secrets:
        for spelling in {secret, json.dumps(secret)[1:-1]}:
            if spelling in text:
                hits += text.count(spelling)
                text = text.replace(spelling, REDACTED)
    return text, hits


def _jsonl(rows: list[Row]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)


def export_bundle(ws: Workspace, dataset: Dataset, out: Path, *, name: str | None = None,
                  users: Sequence[str] | None = None, methods: Sequence[str] | None = None,
                  pseudonymise_people: bool = False, how: Sequence[str] = ()) -> Manifest:
    """Write the bundle of ``dataset``'s work in ``ws`` to ``out`` (atomically); returns its manifest."""
    missing = [u for u in users or [] if u not in dataset.users]
    if missing:
        raise ValueError(f"no user(s) {', '.join(missing)} in {dataset.root}")
    dkey = dataset_key(dataset.root)
    rows = select_rows(ws.tables, dkey, users, methods, dataset.users)
    providers = made_with(rows, ws.tables)
    hide = Rewriter({dkey: DATASET_TOKEN, **dict.fromkeys(dataset_spellings(rows, dkey), DATASET_TOKEN)})
    names = pseudonym_map(*people_names(rows, KINDS)) if pseudonymise_people else {}
    for kind in KINDS:
        carried = [kind.carry(r) for r in rows[kind.table]] if kind.carry else rows[kind.table]
        rows[kind.table] = [pseudonymise(hide.row(r, kind), kind, names) if names else hide.row(r, kind)
                            for r in carried]
    for call in rows.get("llm_calls", []):
        call["endpoint"] = mask_url(str(call["endpoint"]))
    texts = {table_member(k.table): _jsonl(rows[k.table]) for k in KINDS}
    texts[PROMPTS] = _jsonl(collect_prompts(rows))
    secrets, notes = configured_secrets(ws.config), []
    for member, text in list(texts.items()):
        texts[member], hits = _redact(text, secrets)
        if hits:
            log.warning("bundle: %d configured secret value(s) found in %s and redacted", hits, member)
            notes.append(f"{hits} configured secret value(s) found in {member} and replaced by {REDACTED}")
    blobs = {m: t.encode("utf-8") for m, t in texts.items()}
    user_ids = sorted({str(r["user_id"]) for k in KINDS if isinstance(k.scope, Own) and k.scope.user
                       for r in rows[k.table] if r.get("user_id") in dataset.users})
    manifest = Manifest(
        pal_studio_version=pal_studio_version(), created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        dataset=dataset_info(dataset, name or name_of(dataset.root), user_ids),
        selection=Selection(users=list(users) if users is not None else None,
                            methods=list(methods) if methods is not None else None, pseudonymised=pseudonymise_people),
        schema_versions=ws.tables.migrations(),
        tables={k.table: TableInfo(label=k.label, columns=[c for c in ws.tables.columns(k.table) if c not in k.skip],
                                   key=list(k.key), migrations=list(k.migrations), rows=len(rows[k.table]))
                for k in KINDS},
        members={m: Member(sha256=sha256(b), bytes=len(b), rows=b.count(b"\n")) for m, b in blobs.items()},
        made_with=providers, methods=_methods(rows), how=list(how), notes=notes)
    manifest_text, hits = _redact(manifest.model_dump_json(indent=1), secrets)
    if hits:
        raise ValueError("a configured secret appears in the bundle's description (--how?); nothing was written")
    _write_zip(out, {MANIFEST: manifest_text.encode("utf-8"), **blobs})
    return manifest


def _methods(rows: dict[str, list[Row]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows.get(BUILDS, []):
        out[str(r["method"])] = out.get(str(r["method"]), 0) + 1
    return dict(sorted(out.items()))


def _write_zip(out: Path, members: dict[str, bytes]) -> None:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, ZIP_TIME), data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, out)

