"""The manifest of a workspace bundle: what it holds, who and what made it, how to check it.

A bundle is a zip file: ``manifest.json``, one ``tables/<table>.jsonl`` per record kind (one row a line, as
the run store holds it, with the dataset's key replaced by a placeholder) and ``prompts.jsonl`` (the
prompts its records name, with their versions and texts). The manifest names the format and its version,
the PAL Studio version and schema migrations that wrote the records, per table its columns, key, row
count and migrations, per member its SHA-256 and size, the dataset by name with a fingerprint per user,
what was selected, which endpoints and models made the records (never a key), and how it was made.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from palset.dataset import Dataset, User

FORMAT: Literal["pal-studio-bundle"] = "pal-studio-bundle"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)
MANIFEST = "manifest.json"
PROMPTS = "prompts.jsonl"
SUFFIX = ".palbundle"


def table_member(table: str) -> str:
    return f"tables/{table}.jsonl"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Member(Strict):
    sha256: str
    bytes: int
    rows: int


class TableInfo(Strict):
    label: str
    columns: list[str]
    key: list[str]
    migrations: list[int]
    rows: int


class DatasetInfo(Strict):
    """The dataset by name (how another home finds it) and a fingerprint of each user whose records it holds."""

    name: str
    language: str
    users: dict[str, str]  # user id → fingerprint (language and counts of sessions, logs, turns, topics)


class Selection(Strict):
    users: list[str] | None = None  # None: every user
    methods: list[str] | None = None  # None: every method
    pseudonymised: bool = False


class MadeWith(Strict):
    """An endpoint and model that made records, with what it made (from the records and their LLM calls)."""

    role: str
    provider: str = ""
    endpoint: str = ""  # credentials in the URL masked
    model: str
    calls: int = 0
    records: dict[str, int] = Field(default_factory=dict)  # record kind → how many


class Manifest(Strict):
    format: Literal["pal-studio-bundle"] = FORMAT
    format_version: int = FORMAT_VERSION
    pal_studio_version: str
    created_at: str  # ISO 8601, UTC
    dataset: DatasetInfo
    selection: Selection
    schema_versions: list[int]  # migrations applied in the exporting home
    tables: dict[str, TableInfo]
    members: dict[str, Member]
    made_with: list[MadeWith] = Field(default_factory=list)
    methods: dict[str, int] = Field(default_factory=dict)  # memory method → builds (no-LLM methods included)
    how: list[str] = Field(default_factory=list)  # the commands (or the action) that made it
    notes: list[str] = Field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {t: info.rows for t, info in self.tables.items()}

    def models(self) -> list[str]:
        """Every model named, most records first (for a banner)."""
        weight: dict[str, int] = {}
        for m in self.made_with:
            weight[m.model] = weight.get(m.model, 0) + sum(m.records.values()) + m.calls
        return sorted(weight, key=lambda k: (-weight[k], k))


def pal_studio_version() -> str:
    try:
        return metadata.version("pal-studio")
    except metadata.PackageNotFoundError:
        return "unknown"


def user_fingerprint(user: User) -> str:
    """What must match for a user's records to mean the same on another machine (cheap: raw counts only)."""
    raw = json.dumps({"language": user.language, **user.raw_counts.model_dump()}, sort_keys=True)
    return hashlib.sha1(raw.encode()).hexdigest()[:12]


def dataset_info(dataset: Dataset, name: str, users: list[str]) -> DatasetInfo:
    return DatasetInfo(name=name, language=dataset.language,
                       users={u: user_fingerprint(dataset.users[u]) for u in users if u in dataset.users})


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
