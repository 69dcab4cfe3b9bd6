"""The record kinds a workspace bundle carries: one :class:`RecordKind` per table, in dependency order.

Adding a kind of record to bundles is one entry in :data:`KINDS`: its table, the columns that make a row the
same record, which rows belong to an export (:class:`Own` — the dataset's, of the selected users and methods —
:class:`Configured` — rows without a dataset column whose JSON configuration names the dataset, e.g.
experiments — or :class:`Child` — those of exported parents), which columns hold JSON, people's names or ids
joined by ``/``, and, when its key is derived from the dataset's key (a resolved path, different on every
machine), how to derive it again (``rekey``). Everything else — selection, pseudonyms, re-keying, checks, the
all-or-nothing merge — is generic.

Experiments (the ``jobs`` of kind ``experiment`` with their ``job_units`` and ``job_deps``; their report is
rebuilt from the units and the results and judgments they name, :func:`protocol.report.build_report`):

- **Selection.** An experiment goes into a bundle only whole: when the bundle holds every user it names
  (``users = "all"``: every user of the dataset) and every method (its methods and its baseline) — with
  ``--users``/``--methods`` narrower than that it is left out, never cut down to a part whose report would
  silently differ from the source's.
- **Units in progress.** The bundle carries a unit that was ``running`` as ``queued`` without its lease (a lease
  names a process on the exporting machine) and every experiment job in the ``cli`` pool, which the app's
  workers never claim: importing starts no work, in a live home or a presented one; ``pal experiment run FILE``
  there, with the same experiment file, continues it (the job id is derived again from that home's dataset
  key, so it is the same job).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluation.faireval import judgment_key
from evaluation.fidelity.references import REFERENCES
from evaluation.fidelity.service import reference_key, rekey_fidelity
from evaluation.fidelity.types import FidelityConfig
from evaluation.simfidelity.store import rekey as rekey_simfidelity
from evaluation.tasks import result_key_of
from memory.store import build_id_for
from palset.dataset import dataset_digest, dataset_key
from sim.store import run_id_for
from sim.types import RunSpec

log = logging.getLogger(__name__)
Row = dict[str, object]
IdMap = dict[str, str]


@dataclass(frozen=True)
class Own:
    """Rows of the exported dataset (``dataset`` column; None: kinds without one, e.g. PersonaMem records),
    of the selected users (``user``) and methods (every column in ``methods`` must be a selected method, or one of
    ``always``: fidelity's reference memories travel with any selection).
    ``also``: (table, column) whose exported values are further dataset keys (PersonaMem histories)."""

    dataset: str | None = "dataset"
    user: str | None = "user_id"
    methods: tuple[str, ...] = ("method",)
    also: tuple[tuple[str, str], ...] = ()
    always: tuple[str, ...] = ()  # values of the method columns exported whatever methods are selected


@dataclass(frozen=True)
class Configured:
    """Rows of one ``kind`` (in column ``kind_column``) whose JSON ``column`` names the exported dataset at the
    path ``dataset`` (a folder that resolves to its key), included only when the selection holds every user named
    at ``users`` (a list, or ``"all"``: the dataset's users) and every method named at ``methods`` (each path a
    name or a list of names) — a record is exported whole or not at all."""

    kind: str
    kind_column: str = "kind"
    column: str = "config"
    dataset: tuple[str, ...] = ("experiment", "dataset")
    users: tuple[str, ...] = ("experiment", "users")
    methods: tuple[tuple[str, ...], ...] = (("experiment", "methods"), ("experiment", "baseline"))

    def dataset_of(self, row: Row) -> str | None:
        """The dataset folder the row's configuration names, as written there (None: none, or not JSON)."""
        try:
            value = _at(json.loads(str(row[self.column])), self.dataset)
        except ValueError:
            log.warning("bundle: %s row with a %s that is not JSON; not exported", self.kind, self.column)
            return None
        return value if isinstance(value, str) else None

    def covers(self, row: Row, dkey: str, users: Sequence[str] | None, methods: Sequence[str] | None,
               dataset_users: Collection[str]) -> bool:
        """Whether the row is of the dataset ``dkey`` and the selection holds all of its users and methods."""
        folder = self.dataset_of(row)
        if folder is None or dataset_key(Path(folder).expanduser()) != dkey:
            return False
        config = json.loads(str(row[self.column]))
        named = _at(config, self.users)
        wanted = set(dataset_users) if named == "all" else set(_names(named))
        if users is not None and not wanted <= set(users):
            return False
        return methods is None or {m for p in self.methods for m in _names(_at(config, p))} <= set(methods)


def _at(node: object, path: tuple[str, ...]) -> object:
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _names(value: object) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value] if isinstance(value, list) else []


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
    scope: Own | Configured | Child
    migrations: tuple[int, ...]  # the schema migrations that shape the table
    json: tuple[str, ...] = ()  # columns holding JSON (ids and dataset keys inside are rewritten too)
    people: tuple[str, ...] = ()  # columns holding a person's name (pseudonymised on request)
    people_lists: tuple[str, ...] = ()  # columns holding a JSON list of names
    paths: tuple[str, ...] = ()  # columns holding ids joined by "/" (each part rewritten: a unit's id)
    skip: tuple[str, ...] = ()  # columns not carried (surrogate ids: the target numbers its own rows)
    rekey: Callable[[Row], str] | None = None  # the record's key in a home where the dataset has another key
    prompts: Callable[[Row], list[tuple[str, str]]] | None = None  # (prompt name, version) the record used
    carry: Callable[[Row], Row] | None = None  # the row as the bundle carries it (work in progress made inert)


def _build_key(row: Row) -> str:
    return build_id_for(str(row["dataset"]), str(row["user_id"]), str(row["method"]), json.loads(str(row["config"])))


def _run_key(row: Row) -> str:
    return run_id_for(RunSpec.model_validate(json.loads(str(row["data"]))["spec"]))


def _judgment_key(row: Row) -> str:
    data = json.loads(str(row["data"]))
    temperature, seed = data.get("sampling_temperature"), data.get("seed")
    return judgment_key(str(row["run_a"]), str(row["run_b"]), str(row["aspect"]), int(str(row["k"])),
                        str(row["judge_model"]), str(row["prompt_version"]),
                        None if temperature is None else float(temperature), data.get("prompt_name"),
                        None if seed is None else int(seed))


def _result_key(row: Row) -> str:
    return result_key_of(*(str(row[c]) for c in ("dataset", "user_id", "sample_id", "topic_key", "method", "task",
                                                 "model", "prompt_version")))


def _fidelity_key(row: Row) -> str:
    if str(row["method"]) in REFERENCES:  # a reference memory's report: keyed by the dataset, not a build
        data = json.loads(str(row["data"]))
        config = FidelityConfig.model_validate(data["config"])
        return reference_key(str(row["dataset"]), str(row["user_id"]), str(row["method"]), str(row["embedder"]),
                             config, gold_version=str(data.get("gold_version", "1")),
                             metric_version=str(data.get("metric_version", "1")))  # a report's defaults (types.py)
    return rekey_fidelity(str(row["fidelity_key"]), str(row["build_id"]))


def _simfidelity_key(row: Row) -> str:
    return rekey_simfidelity(str(row["key"]), str(row["run_id"]))


def _job_key(row: Row) -> str:
    """An experiment's job id in this home: ``exp-<name>-<digest of the dataset's key>`` — what
    :meth:`protocol.config.ExperimentConfig.job_id` gives for the same file here (``studio`` may not import
    ``protocol``; ``tests/studio/test_bundle.py`` checks the two agree)."""
    if row["kind"] != "experiment":
        return str(row["job_id"])
    exp = json.loads(str(row["config"]))["experiment"]
    return f"exp-{exp['name']}-{dataset_digest(exp['dataset'])}"


def _job_at_rest(row: Row) -> Row:
    """In the ``cli`` pool: only ``pal experiment run`` runs its units, never the app's workers."""
    return {**row, "pool": "cli"}


def _unit_at_rest(row: Row) -> Row:
    """A unit that was running is carried queued, without the lease of a process on the exporting machine (and
    its attempt given back, as when a worker stops: :meth:`jobs.store.JobStore.release`)."""
    if row["status"] != "running":
        return row
    return {**row, "status": "queued", "lease_owner": None, "lease_until": None, "progress": 0.0,
            "progress_text": "", "attempts": max(0, int(str(row["attempts"])) - 1)}


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
JOBS = "jobs"
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
    RecordKind("memory_fidelity", "fidelity reports", ("fidelity_key",), Own(always=tuple(REFERENCES)), (20,),
               json=("data",), rekey=_fidelity_key),
    RecordKind("sim_fidelity", "simulator-fidelity checks of runs", ("key",), Own(), (27,), json=("data",),
               rekey=_simfidelity_key),
    RecordKind(JOBS, "experiments (their jobs and configuration)", ("job_id",), Configured("experiment"), (30,),
               json=("config",), people=("created_by",), rekey=_job_key, carry=_job_at_rest),
    RecordKind("job_units", "experiment units (what each ran, its result)", ("unit_id",), Child("job_id", (JOBS,)),
               (30,), json=("payload", "result"), paths=("unit_id",), carry=_unit_at_rest),
    RecordKind("job_deps", "experiment unit dependencies", ("unit_id", "dep_id"), Child("unit_id", ("job_units",)),
               (30,), paths=("unit_id", "dep_id")),
    RecordKind("llm_calls", "LLM calls of the builds, runs and judgments",
               ("run_id", "ts", "role", "model", "prompt_name"), Child("run_id", (BUILDS, "sim_runs", "judgments")),
               (1, 28, 41), skip=("id",), prompts=_call_prompts),
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
