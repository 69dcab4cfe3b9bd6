"""A home with every kind of record a bundle carries, made through the real stores with scripted LLMs.

Memory builds (the gold memory and no-LLM baselines, one edited item, one forgotten item), finished
simulation runs with their LLM calls, FairEval judgments of every method pair, a single-turn result, fidelity
reports, a PersonaMem-v2 record, a review batch with assignments and answers of two named annotators, a small
experiment (one user, one query topic, every task of the protocol, run through the job engine with the
scripted protocol LLM of :mod:`testkit.protocol_fake`) — so
tests (export → import → the same records; presentation mode) and ``bench/bundle_figures.py`` share one
realistic fixture.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from itertools import combinations

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from backends.llm.types import ChatRequest
from evaluation.fidelity.service import measure_build, reference_reports
from evaluation.personamem.evaluate import PMRecord
from evaluation.service import judge_runs, pair_runs
from evaluation.simfidelity.registry import REVIEWED
from evaluation.simfidelity.service import matchers, measure_runs
from evaluation.tasks import TaskResult, result_key_of
from jobs.types import JobSummary
from palset.dataset import Dataset, dataset_key
from protocol.config import ExperimentConfig
from protocol.plan import build_job
from review.batches import pairwise_candidates, plan_batch, simturn_candidates
from sim.batch import plan_runs
from studio.workspace import Workspace
from testkit.protocol_fake import protocol_reply
from testkit.requests import all_text, role_of, user_line, wants_json

JUDGE_MODEL = "scripted-judge"
ANNOTATORS = ("alice.annotator", "bo.annotator")


def scripted_reply(req: ChatRequest) -> str:
    """Answers for the user simulator (JSON), the query summary, the FairEval judge and the assistant."""
    first, role = all_text(req), role_of(req)
    if role == "simulator":
        words = user_line(req)
        return json.dumps({"content": words}) if wants_json(req) else words
    if role == "summary":
        return "help with the week"
    if "## assistant-1" in first:
        longer = first.split("## assistant-2")[0].count("\n") >= first.split("## assistant-2")[-1].count("\n")
        scores = (8, 6) if longer else (6, 8)
        return json.dumps({"analysis": {"assistant-1": "clear", "assistant-2": "vaguer", "overall": "close"},
                           "scores": {"assistant-1": scores[0], "assistant-2": scores[1]}})
    return "Here is a plan that fits your week."


def scripted_llm(ws: Workspace, session_id: str = "worked"):
    fake = ScriptedLLM(scripted_reply)
    return ws.llm(session_id=session_id, providers=dict.fromkeys(ROLES, fake)), fake


def fill_home(ws: Workspace, dataset: Dataset, users: Sequence[str], methods: Sequence[str] = ("gold", "rag-turn"),
              *, task_ids: Sequence[str] | None = None, review: bool = True, fidelity: bool = True,
              experiment: bool = True) -> dict[str, int]:
    """Make every kind of record for ``users`` × ``methods`` of ``dataset`` in ``ws``; returns what was made."""
    dkey = dataset_key(dataset.root)
    made = {"builds": 0, "runs": 0, "judgments": 0}
    for uid in users:
        for method in methods:
            builder = ws.open_builder(dataset, uid, method)
            builder.run()
            made["builds"] += 1
            if fidelity and method != "vanilla":
                measure_build(builder, ws.fidelity)
        if fidelity:  # two of the reference rows (the others cost more and travel the same way)
            emb = ws.open_builder(dataset, uid, methods[0]).embedder
            reference_reports(dataset, dkey, dataset.users[uid], emb, ws.fidelity, names=("ref:empty", "ref:gold"))
    first = ws.open_builder(dataset, users[0], methods[-1])
    items = first.store.items_as_of(first.build_id, first.latest_stage())
    if len(items) >= 2:
        first.edit(items[0].id, items[0].text + " (checked by a person)", editor=ANNOTATORS[0])
        first.forget({items[1].id}, reason="the user asked")
    tasks = list(task_ids) if task_ids else [dataset.users[users[0]].query[0].task_id(
        dataset.users[users[0]].query[0].topics[0].key)]
    llm, _ = scripted_llm(ws)
    records = []
    for spec in plan_runs(dataset, methods, task_ids=tasks):
        records.append(ws.open_simulation(dataset, spec, llm).run())
        made["runs"] += 1
    if fidelity:  # the simulated users checked (simulator fidelity, the rule classifier)
        made["simulator_checks"] = len(measure_runs(records, dataset, matchers(lambda lang: ws.embedder(None, lang)),
                                                    ws.simfidelity)[0])
    judge_llm, _ = scripted_llm(ws.with_config(_judge_config(ws)), "worked-judge")
    for a, b in combinations(methods, 2):
        pairs = pair_runs(ws.sims, dkey, a, b)
        made["judgments"] += len(judge_runs(judge_llm, dataset, ws.sims, ws.evals, pairs, ["requirement", "preference"],
                                            k=1))
    _single_turn_and_personamem(ws, dkey, tasks[0], methods[0])
    if review and len(methods) >= 2:
        _review(ws, dkey, methods)
        _simturn_review(ws, dkey, records)
    tested = [m for m in methods if m != "vanilla"]
    if experiment and tested:
        made["experiment_units"] = run_worked_experiment(ws, dataset, users[0], tested[0]).total
    return made


def worked_experiment(dataset: Dataset, user: str, method: str) -> ExperimentConfig:
    """``method`` against vanilla for ``user``'s first query topic, every task of the protocol, k = 1."""
    return ExperimentConfig(name="worked", dataset=str(dataset.root), users=[user], topics_per_user=1,
                            methods=[method], baseline="vanilla", k=1, concurrency=1,
                            tasks=["build", "restatement", "proposal", "selection", "dialogue", "faireval"])


def run_worked_experiment(ws: Workspace, dataset: Dataset, user: str, method: str) -> JobSummary:
    """Run :func:`worked_experiment` to its end, as ``pal experiment run`` does, with the protocol's scripted LLM."""
    from studio.units import UnitEnv

    exp = worked_experiment(dataset, user, method)
    view = ws.configured(exp.job_config())
    job = build_job(exp, dataset)
    llm = view.llm(session_id=job.job_id, providers=dict.fromkeys(ROLES, ScriptedLLM(protocol_reply)))
    summary = ws.jobs.run(ws.jobs.submit(job, env=UnitEnv(view, llm)), exp.concurrency)
    if summary.status != "done":
        raise RuntimeError(f"the worked experiment ended {summary.status}: {summary.errors}")
    return summary


def _judge_config(ws: Workspace):
    roles = {r: c.model_copy(update={"model": JUDGE_MODEL}) if r == "judge" else c for r, c in ws.config.roles.items()}
    return ws.config.model_copy(update={"roles": roles})


def _single_turn_and_personamem(ws: Workspace, dkey: str, task_id: str, method: str) -> None:
    sample_id, topic_key = task_id.rsplit("_", 1)
    uid = sample_id.split("_sample")[0]
    key = result_key_of(dkey, uid, sample_id, topic_key, method, "restatement", "scripted", "1")
    ws.evals.save_result(TaskResult(result_key=key, dataset=dkey, user_id=uid, sample_id=sample_id, topic_key=topic_key,
                                    method=method, task="restatement", model="scripted",
                                    prompt_name="eval/requirement_restatement", prompt_version="1", ok=True,
                                    prediction="The user needs a calmer week.", bleu={1: 20.0, 2: 9.0, 3: 4.0, 4: 2.0},
                                    created_at=time.time()))
    ws.personamem.save([PMRecord(item_id="pm-1", form="mcq", method=method, pref_type="likes", who="self",
                                 dynamics="static", query="What should I cook?", model="scripted",
                                 prompt_name="eval/personamem_mcq", prompt_version="1", ok=True, correct=True)],
                       history_key="personamem:worked:x1")


def _review(ws: Workspace, dkey: str, methods: Sequence[str]) -> None:
    runs = ws.sims.list(dataset=dkey, status="finished")
    candidates = pairwise_candidates(runs, methods[0], methods[1])
    plan = plan_batch("Worked pairwise batch", "pairwise", dkey, candidates, len(candidates), 7, 2, list(ANNOTATORS))
    batch_id = ws.reviews.create_batch(plan, created_by="carol.researcher")
    for who in ANNOTATORS:
        for no in ws.reviews.assigned(batch_id, who):
            ws.reviews.answer(batch_id, no, who, "requirement", "A")
            ws.reviews.answer(batch_id, no, who, "preference", "tie")


def _simturn_review(ws: Workspace, dkey: str, records) -> None:
    """A blinded batch of simulated user turns (people check the checker), answered by both annotators."""
    turns = [{"run_id": r.run_id, "user_id": r.spec.user_id, "sample_id": r.spec.sample_id,
              "topic_key": r.spec.topic_key, "turn_no": u.turn_no, "act": u.act.value}
             for r in records for u in r.utterances if u.side == "user" and u.actor == "simulator"]
    if not turns:
        return
    plan = plan_batch("Worked simulated-turn batch", "simturn", dkey, simturn_candidates(turns), 4, 7, 2,
                      list(ANNOTATORS))
    batch_id = ws.reviews.create_batch(plan, created_by="carol.researcher")
    for who in ANNOTATORS:
        for no in ws.reviews.assigned(batch_id, who):
            for question in REVIEWED:
                ws.reviews.answer(batch_id, no, who, question, "yes" if question == "persona" else "na")


TOUR_METHODS = ("gold", "rag-turn", "vanilla-log")
TOUR_TASK = "1002_sample7_topic-1"  # the topic the demo tour's Simulate and Evaluate stops show


def make_tour_bundle(home, dataset: Dataset, out, **env: str):
    """A bundle with the records every stop of the demo tour shows (user 1002; scripted LLMs; hash embedder
    unless ``env`` names another), written to ``out``; returns its manifest."""
    from studio.bundle.export import export_bundle
    from testkit.workspace import make_workspace

    ws = make_workspace(home, env={"PAL_EMBEDDER": "hash", **env})
    fill_home(ws, dataset, ["1002"], TOUR_METHODS, task_ids=[TOUR_TASK])
    return export_bundle(ws, dataset, out, pseudonymise_people=True, how=["testkit.worked.make_tour_bundle"])
