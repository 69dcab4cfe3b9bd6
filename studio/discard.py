"""Discard simulation runs with what was made of them — the judgments that read them and their simulator fidelity —
so that the command which made them records them anew (``pal runs discard``; ``scripts/record_demo.py --redo``).

Why: a run recorded before a rule changed (a User-LLM turn the persona rule now rejects, an assistant reply that
copied its instruction) stays as it was; the demo workspace replaces such runs rather than keep them. The same
command resumes, so re-running it simulates only the discarded runs and judges only their pairs again (the run id
is the spec's, so the new run takes its place; cached LLM answers to unchanged requests are reused).

The LLM calls made for a discarded run and its judgments are not deleted — what they cost stays in the session's
and the lab's totals — but filed under ``discarded@<time>:<id>``, so the run made again under the same id counts
only its own. The job units that made, judged or checked a run are queued again, so the command resubmitting its
job does not skip them as done. Refused, with nothing deleted: a run id that is not stored, a run somebody drives now (its lease), and a run a
review batch shows its annotators (their answers are about that transcript)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from backends.store.runstore import RunStore
from evaluation.simfidelity.store import SimFidelityStore
from evaluation.store import EvalStore
from jobs.store import JobStore
from sim.store import SimStore

if TYPE_CHECKING:
    from studio.workspace import Workspace

log = logging.getLogger(__name__)


class DiscardRefused(ValueError):
    """Nothing was discarded: the message names every run that cannot be, and why."""


class Discarded(BaseModel):
    """One discarded run: what it was and what went with it."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    user_id: str
    sample_id: str
    topic_key: str
    method: str
    utterances: int
    judgments: list[str]
    fidelity: int
    calls: int  # LLM calls of the run and its judgments, filed under "discarded@<time>:<id>" (their cost stays counted)
    requeued: list[str] = []  # job units that made, judged or checked it, queued again for the command run again


def discard_problems(ws: Workspace, run_ids: list[str]) -> list[str]:
    """Why each of ``run_ids`` cannot be discarded (empty: all can)."""
    problems = []
    for run_id in dict.fromkeys(run_ids):
        if not ws.sims.exists(run_id):
            problems.append(f"{run_id}: no such run in {ws.home}")
            continue
        if (lease := ws.sims.driver(run_id)) is not None:
            problems.append(f"{run_id}: {lease.holder} is driving it now (stop it there first)")
        if batches := ws.reviews.batches_showing_run(run_id):
            problems.append(f"{run_id}: review batch {', '.join(batches)} shows it to annotators")
    return problems


def discard_runs(ws: Workspace, run_ids: list[str], actor: str) -> list[Discarded]:
    """Discard every run of ``run_ids`` with its judgments and simulator fidelity, in one transaction, each
    recorded in the audit log; :class:`DiscardRefused` (nothing deleted) when any of them cannot be."""
    ids = list(dict.fromkeys(run_ids))
    if not ids:
        raise DiscardRefused("no run ids given")
    if problems := discard_problems(ws, ids):
        raise DiscardRefused("nothing discarded: " + "; ".join(problems))
    records = {run_id: ws.sims.load(run_id) for run_id in ids}
    stamp = time.strftime("%Y%m%dT%H%M%S")
    done = []
    with ws.db.write() as conn:
        for run_id, record in records.items():
            judgments = EvalStore.delete_judgments_of_run_in(conn, run_id)
            fidelity = SimFidelityStore.delete_of_run_in(conn, run_id)
            utterances = SimStore.delete_in(conn, run_id)
            calls = RunStore.detach_calls_in(conn, [run_id, *judgments], f"discarded@{stamp}")
            requeued = JobStore.requeue_reading_in(conn, run_id)
            spec = record.spec
            done.append(Discarded(run_id=run_id, user_id=spec.user_id, sample_id=spec.sample_id,
                                  topic_key=spec.topic_key, method=spec.method, utterances=utterances,
                                  judgments=judgments, fidelity=fidelity, calls=calls, requeued=requeued))
    for d in done:
        log.info("discarded %s (%s utterances, %s judgments, %s fidelity results) for %s", d.run_id, d.utterances,
                 len(d.judgments), d.fidelity, actor)
        ws.audit.record(actor, "runs.discard", d.run_id, **d.model_dump(exclude={"run_id"}))
    return done
