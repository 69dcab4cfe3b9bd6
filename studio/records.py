"""Record bundles: the rows and files a unit reads and writes, so a unit can run where the run store is not.

A Ray worker gets the rows a unit needs (its memory build, the runs it continues or judges) and the files under
the home it reads (PLUM adapters, a generation run's steps), runs the unit on a scratch workspace, and returns
what changed — new or changed rows of the record tables and changed files. The driver applies them to its own
run store (inserted, or updated in place by primary key — never replaced, which would cascade-delete a
build's or a run's children; an LLM call gets a new id) and re-indexes the memory items it
received, so its Chroma collections answer as if the unit had run there.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from backends.paths import METHOD_FILES, SYNTH
from backends.store.db import Database

TABLES = ("memory_builds", "memory_build_stages", "memory_items", "memory_forgotten", "sim_runs", "sim_turns",
          "judgments", "bench_results", "personamem_records", "sim_fidelity", "llm_calls")
NO_ID = {"llm_calls"}  # rows whose INTEGER id is local to one database
FILE_ROOTS = (METHOD_FILES, SYNTH)


class Bundle(BaseModel):
    """Rows per table (column → value) and files (path relative to the home → bytes)."""

    rows: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    files: dict[str, bytes] = Field(default_factory=dict)

    def count(self) -> int:
        return sum(len(v) for v in self.rows.values()) + len(self.files)


def export_rows(db: Database, selection: dict[str, tuple[str, list[Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Rows of ``table`` matching ``where`` (an SQL condition with ``?`` marks and its arguments), per table."""
    out: dict[str, list[dict[str, Any]]] = {}
    with db.read() as conn:
        for table, (where, args) in selection.items():
            if table not in TABLES:
                raise ValueError(f"not a record table: {table}")
            out[table] = [dict(r) for r in conn.execute(f"SELECT * FROM {table} WHERE {where}", args)]
    return out


def all_rows(db: Database) -> dict[str, set[tuple]]:
    """Every row of every record table, as tuples (to tell afterwards what a unit changed)."""
    with db.read() as conn:
        return {t: {tuple(r) for r in conn.execute(f"SELECT * FROM {t}")} for t in TABLES}


def changed_rows(db: Database, before: dict[str, set[tuple]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    with db.read() as conn:
        for t in TABLES:
            cur = conn.execute(f"SELECT * FROM {t}")
            cols = [c[0] for c in cur.description]
            rows = [dict(zip(cols, r)) for r in cur if tuple(r) not in before[t]]
            if rows:
                out[t] = rows
    return out


def apply_rows(db: Database, rows: dict[str, list[dict[str, Any]]]) -> int:
    """Insert every row, or update the stored row with its primary key (parents first: the tables are in
    dependency order). Never ``INSERT OR REPLACE``: replacing a build or a run row would delete, by cascade, the
    stages, items or utterances stored under it."""
    n = 0
    with db.write() as conn:
        for table in TABLES:
            if not rows.get(table):
                continue
            keys = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[5]]
            for row in rows[table]:
                data = {k: v for k, v in row.items() if not (table in NO_ID and k == "id")}
                cols, marks = ", ".join(data), ", ".join("?" * len(data))
                sql = f"INSERT INTO {table} ({cols}) VALUES ({marks})"
                if table not in NO_ID:
                    updates = ", ".join(f"{c}=excluded.{c}" for c in data if c not in keys)
                    sql += f" ON CONFLICT ({', '.join(keys)}) DO " + (f"UPDATE SET {updates}" if updates else "NOTHING")
                conn.execute(sql, list(data.values()))
                n += 1
    return n


def read_files(home: Path, folders: list[Path]) -> dict[str, bytes]:
    """Every file under these folders of ``home``, by path relative to it."""
    out: dict[str, bytes] = {}
    for folder in folders:
        if folder.is_dir():
            for path in folder.rglob("*"):
                if path.is_file():
                    out[str(path.relative_to(home))] = path.read_bytes()
    return out


def file_digests(home: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for root in FILE_ROOTS:
        base = home / root
        if base.is_dir():
            for path in base.rglob("*"):
                if path.is_file():
                    out[str(path.relative_to(home))] = hashlib.sha1(path.read_bytes()).hexdigest()
    return out


def changed_files(home: Path, before: dict[str, str]) -> dict[str, bytes]:
    return {rel: (home / rel).read_bytes() for rel, digest in file_digests(home).items() if before.get(rel) != digest}


def write_files(home: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = (home / rel).resolve()
        if not path.is_relative_to(home.resolve()):
            raise ValueError(f"file outside the home in a bundle: {rel}")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".part")
        tmp.write_bytes(data)
        tmp.replace(path)
