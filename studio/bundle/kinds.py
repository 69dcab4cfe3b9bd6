"""The record kinds a workspace bundle carries: one :class:`RecordKind` per table, in dependency order.

Adding a kind of record to bundles is one entry in :data:`KINDS`: its table, the columns that make a row the
same record, which rows belong to an export (:class:`Own` — the dataset's, of the selected users and methods —
or :class:`Child` — those of exported parents), which columns hold JSON or people's names, and, when its key
is derived from the dataset's key (a resolved path, different on every machine), how to derive it again
(``rekey``). Everything else — selection, pseudonyms, re-keying, checks, the all-or-nothing merge — is generic.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from evaluation.faireval import judgment_key
from evaluation.fidelity.service import rekey_fidelity
from evaluation.tasks import result_key_of
from memory.store import build_id_for
from sim.store import run_id_for
from sim.types import RunSpec

Row = dict[str, object]
IdMap = dict[str, str]


@dataclass(frozen=True)
class Own:
    """Rows of the exported dataset (``dataset`` column; None: kinds without one, e.g. PersonaMem records),
    of the selected users (``user``) and methods (every column in ``methods`` must be a selected method).
    ``also``: (table, column) whose exported values are further dataset keys (PersonaMem histories)."""

    dataset: str | None = "dataset"
    user: str | None = "user_id"
    methods: tuple[str, ...] = ("method",)
    also: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Child:
    """Rows whose ``column`` holds the key of an exported row of one of ``parents`` (tables)."""

    column: str
    parents: tuple[str, ...]


@dataclass(frozen=True)
class RecordKind:
    table: str
    label: str
    key: tuple[str, ...]  # what makes two rows the same record (the primary key, or a natural key)
    scope: Own | Child
    migrations: tuple[int, ...]  # the schema migrations that shape the table
    json: tuple[str, ...] = ()  # columns holding JSON (ids and dataset keys inside are rewritten too)
    people: tuple[str, ...] = ()  # columns holding a person's name (pseudonymised on request)
    people_lists: tuple[str, ...] = ()  # columns holding a JSON list of names
    skip: tuple[str, ...] = ()  # columns not carried (surrogate ids: the target numbers its own rows)
    rekey: Callable[[Row], str] | None = None  # the record's key in a home where the dataset has another key
    prompts: Callable[[Row], list[tuple[str, str]]] | None = None  # (prompt name, version) the record used


def _build_key(row: Row) -> str:
    return build_id_for(str(row["dataset"]), str(row["user_id"]), str(row["method"]), json.loads(str(row["config"])))


def _run_key(row: Row) -> str:
    return run_id_for(RunSpec.model_validate(json.loads(str(row["data"]))["spec"]))


def _judgment_key(row: Row) -> str:
    return judgment_key(str(row["run_a"]), str(row["run_b"]), str(row["aspect"]), int(str(row["k"])),
                        str(row["judge_model"]), str(row["prompt_version"]))


def _result_key(row: Row) -> str:
    return result_key_of(*(str(row[c]) for c in ("dataset", "user_id", "sample_id", "topic_key", "method", "task",
                                                 "model", "prompt_version")))


def _fidelity_key(row: Row) -> str:
    return rekey_fidelity(str(row["fidelity_key"]), str(row["build_id"]))


def _call_prompts(row: Row) -> list[tuple[str, str]]:
    return [(str(row["prompt_name"]), str(row["prompt_version"]))] if row.get("prompt_name") else []


def _turn_prompts(row: Row) -> list[tuple[str, str]]:
    data = json.loads(str(row["data"]))
    return [(data["prompt_name"], str(data.get("prompt_version")))] if data.get("prompt_name") else []


def _judgment_prompts(row: Row) -> list[tuple[str, str]]:
    return [(f"eval/faireval_{row['aspect']}", str(row["prompt_version"]))]


def _result_prompts(row: Row) -> list[tuple[str, str]]:
    data = json.loads(str(row["data"]))
    out = [(data["prompt_name"], str(data["prompt_version"]))] if data.get("prompt_name") else []
    if data.get("g_prompt_version"):
        out.append(("eval/gscore", str(data["g_prompt_version"])))
    return out


BUILDS = "memory_builds"
OF_BUILD = Child("build_id", (BUILDS,))
OF_BATCH = Child("batch_id", ("review_batches",))

KINDS: tuple[RecordKind, ...] = (
    RecordKind("personamem_records", "PersonaMem-v2 answer records", ("history_key", "method", "item_id", "form"),
               Own(dataset=None, user=None), (6,), json=("data",)),
    RecordKind(BUILDS, "memory builds", ("build_id",),
               Own(also=(("personamem_records", "history_key"),)), (2,), json=("config",), rekey=_build_key),
    RecordKind("memory_build_stages", "memory build stages (cost, notes)", ("build_id", "stage"), OF_BUILD, (2,),
               json=("notes",)),
    RecordKind("memory_items", "memory item versions", ("build_id", "item_id", "version"), OF_BUILD, (2,),
               json=("data",)),
    RecordKind("memory_forgotten", "forgotten memory items", ("build_id", "item_id"), OF_BUILD, (2,)),
    RecordKind("memory_item_edits", "memory item edits by people", ("build_id", "item_id", "version", "edited_at"),
               OF_BUILD, (13,), people=("editor",), skip=("id",)),
    RecordKind("sim_runs", "simulation runs", ("run_id",), Own(), (3,), json=("data",), rekey=_run_key),
    RecordKind("sim_turns", "simulation utterances", ("run_id", "turn_no", "side"), Child("run_id", ("sim_runs",)),
               (3,), json=("data",), prompts=_turn_prompts),
    RecordKind("judgments", "FairEval judgments", ("judgment_key",), Own(methods=("method_a", "method_b")), (4,),
               json=("data",), rekey=_judgment_key, prompts=_judgment_prompts),
    RecordKind("bench_results", "single-turn results", ("result_key",), Own(), (4,), json=("data",),
               rekey=_result_key, prompts=_result_prompts),
    RecordKind("memory_fidelity", "fidelity reports", ("fidelity_key",), Own(), (20,), json=("data",),
               rekey=_fidelity_key),
    RecordKind("llm_calls", "LLM calls of the builds, runs and judgments",
               ("run_id", "ts", "role", "model", "prompt_name"), Child("run_id", (BUILDS, "sim_runs", "judgments")),
               (1, 41), skip=("id",), prompts=_call_prompts),
    RecordKind("review_batches", "review batches", ("batch_id",), Own(user=None, methods=()), (5,),
               json=("annotators", "data"), people=("created_by",), people_lists=("annotators",)),
    RecordKind("review_items", "review items", ("batch_id", "item_no"), OF_BATCH, (5,), json=("payload",)),
    RecordKind("review_assignments", "review assignments", ("batch_id", "item_no", "annotator"), OF_BATCH, (5,),
               people=("annotator",)),
    RecordKind("review_answers", "review answers", ("batch_id", "item_no", "annotator", "question"), OF_BATCH, (5,),
               people=("annotator",), skip=("id",)),
)
BY_TABLE: dict[str, RecordKind] = {k.table: k for k in KINDS}


def _check_order() -> None:
    """A child kind comes after every parent it names (the merge inserts parents first)."""
    seen: set[str] = set()
    for kind in KINDS:
        if isinstance(kind.scope, Child):
            missing = set(kind.scope.parents) - seen
            assert not missing, f"{kind.table} is listed before its parent(s) {sorted(missing)}"
        seen.add(kind.table)


_check_order()
