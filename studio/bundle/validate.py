"""Every row of a bundle checked against the records the app itself writes, before anything is merged.

A bundle is made by another home (or by hand): its rows must be what this install's stores would have written, or a
page that reads them later breaks (an unknown review task, a run status no view knows) or shows what it should not
(a row of another dataset carrying that machine's folder, a batch id that breaks out of a code span). So each row
is parsed with the pydantic record its store reads back (``RunRecord``, ``Utterance``, ``Judgment``, ``TaskResult``,
``PMRecord``, ``MemoryItem``, ``FidelityReport``, ``RunFidelity``, ``BatchRecord`` and the review payloads…), its plain columns must
agree with that record, rows of the dataset must carry the bundle's dataset placeholder and one of its users, and a
child row must belong to a parent row of the bundle. The first problem refuses the bundle, naming member, line and
field.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from evaluation.faireval import Judgment
from evaluation.fidelity.types import FidelityReport
from evaluation.personamem.evaluate import PMRecord
from evaluation.simfidelity.types import RunFidelity
from evaluation.tasks import TaskResult
from jobs.types import STATUSES
from memory.methods import METHODS
from memory.types import MemoryItem
from review.batches import PAYLOADS, TASKS, BatchRecord
from sim.types import RunRecord, Utterance
from studio.bundle.kinds import KINDS, Child, Own, Row
from studio.bundle.manifest import Manifest, table_member
from studio.bundle.reader import BundleError
from studio.bundle.rewrite import DATASET_TOKEN


class RowProblem(ValueError):
    """What is wrong with one row (the caller adds where)."""


def _model(model: type[BaseModel], column: str) -> Callable[[Row], BaseModel]:
    def check(row: Row) -> BaseModel:
        return model.model_validate_json(str(row[column]))

    return check


def _same(row: Row, record: BaseModel, pairs: dict[str, str]) -> None:
    """Columns that repeat a field of the row's JSON record must hold the same value."""
    for column, path in pairs.items():
        value: Any = record
        for part in path.split("."):
            value = getattr(value, part)
        if row[column] != value:
            raise RowProblem(f"{column} is {row[column]!r} but its record says {value!r}")


def _run(row: Row) -> None:
    record = RunRecord.model_validate_json(str(row["data"]))
    _same(row, record, {"run_id": "run_id", "status": "status", "dataset": "spec.dataset", "user_id": "spec.user_id",
                        "sample_id": "spec.sample_id", "topic_key": "spec.topic_key", "method": "spec.method"})


def _turn(row: Row) -> None:
    _same(row, Utterance.model_validate_json(str(row["data"])), {"turn_no": "turn_no", "side": "side"})


def _build(row: Row) -> None:
    if row["method"] not in METHODS:
        raise RowProblem(f"method {row['method']!r} is not a memory method of this PAL Studio")
    if not isinstance(json.loads(str(row["config"])), dict):
        raise RowProblem("config is not a JSON object")


def _batch(row: Row) -> None:
    BatchRecord.model_validate({**row, "annotators": json.loads(str(row["annotators"])),
                                "data": json.loads(str(row["data"]))})


def _simfidelity(row: Row) -> None:
    record = RunFidelity.model_validate_json(str(row["data"]))
    _same(row, record, {"key": "key", "run_id": "run_id", "dataset": "dataset", "user_id": "user_id",
                        "method": "method", "simulator": "simulator", "embedder": "embedder"})


def _job_unit(row: Row) -> None:
    if row["status"] not in STATUSES:
        raise RowProblem(f"status {row['status']!r} is not one of {', '.join(STATUSES)}")


CHECKS: dict[str, Callable[[Row], object]] = {
    "sim_runs": _run,
    "sim_turns": _turn,
    "judgments": _model(Judgment, "data"),
    "bench_results": _model(TaskResult, "data"),
    "personamem_records": _model(PMRecord, "data"),
    "memory_builds": _build,
    "memory_items": _model(MemoryItem, "data"),
    "memory_fidelity": _model(FidelityReport, "data"),
    "sim_fidelity": _simfidelity,
    "review_batches": _batch,
    "job_units": _job_unit,
}


def _json_columns(row: Row, columns: tuple[str, ...]) -> None:
    for column in columns:
        value = row[column]
        if value is None:
            continue
        try:
            json.loads(str(value))
        except RecursionError:
            raise RowProblem(f"{column}: JSON nested too deeply") from None
        except ValueError as e:
            raise RowProblem(f"{column}: not JSON ({e})") from None


def validate_rows(path: Path, manifest: Manifest, rows: dict[str, list[Row]]) -> None:
    """Refuse (:class:`BundleError`) at the first row that is not what this install writes; see the module."""
    users = set(manifest.dataset.users)
    keys: dict[str, set[object]] = {}
    others: set[object] = set()  # further dataset keys an Own kind names (PersonaMem histories' builds)
    tasks: dict[object, str] = {}
    for kind in KINDS:
        check = CHECKS.get(kind.table)
        parents: set[object] = set()
        if isinstance(kind.scope, Child):
            for parent in kind.scope.parents:
                parents |= keys.get(parent, set())
        seen: set[object] = set()
        if isinstance(kind.scope, Own):
            others |= {r[column] for table, column in kind.scope.also for r in rows.get(table, [])}
        for no, row in enumerate(rows.get(kind.table, []), start=1):
            where = f"{table_member(kind.table)} line {no}"
            try:
                _json_columns(row, kind.json)
                if isinstance(kind.scope, Own):
                    _own(row, kind.scope, users, others)
                if isinstance(kind.scope, Child) and row[kind.scope.column] not in parents:
                    raise RowProblem(f"{kind.scope.column} {row[kind.scope.column]!r} names no record of the bundle")
                if check is not None:
                    check(row)
                if kind.table == "review_batches":
                    tasks[row["batch_id"]] = str(row["task"])
                elif kind.table == "review_items":
                    PAYLOADS[tasks[row["batch_id"]]].model_validate_json(str(row["payload"]))
                elif kind.table == "review_answers":
                    _answer(row, tasks[row["batch_id"]])
            except ValidationError as e:
                first = e.errors()[0]
                field = ".".join(str(p) for p in first["loc"]) or "row"
                raise BundleError(path, f"{where}: {field}: {first['msg']}") from None
            except RowProblem as e:
                raise BundleError(path, f"{where}: {e}") from None
            except (KeyError, TypeError, ValueError, RecursionError) as e:
                raise BundleError(path, f"{where}: not a record this PAL Studio writes ({type(e).__name__}: "
                                        f"{str(e)[:200]})") from None
            key = row[kind.key[0]] if len(kind.key) == 1 else tuple(row[c] for c in kind.key)
            if key in seen:
                raise BundleError(path, f"{where}: a second row with the key {key!r}")
            seen.add(key)
        keys[kind.table] = {row[kind.key[0]] for row in rows.get(kind.table, [])}


def _own(row: Row, scope: Own, users: set[str], others: set[object]) -> None:
    """A row of the bundle's dataset (its placeholder, one of its users), or of a further dataset it names."""
    if scope.dataset and row.get(scope.dataset) in others:
        return
    if scope.dataset and row.get(scope.dataset) != DATASET_TOKEN:
        raise RowProblem(f"a record of another dataset ({scope.dataset} is not the bundle's)")
    if scope.user and str(row[scope.user]) not in users:
        raise RowProblem(f"user {row[scope.user]!r} is not among the bundle's users")


def _answer(row: Row, task: str) -> None:
    questions = {q.key: q for q in TASKS[task].questions}
    question = questions.get(str(row["question"]))
    if question is None:
        raise RowProblem(f"question {row['question']!r} is not asked by {task} batches")
    if question.options and row["value"] not in {v for v, _ in question.options}:
        raise RowProblem(f"{row['value']!r} is not an answer to {question.key}")
