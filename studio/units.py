"""The unit kinds of the job engine, wired to the domains by the composition root.

Each kind is a function of a :class:`jobs.units.UnitContext` whose ``env`` is a :class:`UnitEnv` (the workspace
and the LLM client the job runs with). Every function is resumable because the domain work under it is: a memory
session unit commits per stage, a simulation unit per utterance, a judgment or task result is stored under its key
and loaded instead of redone, a generation per step. So a unit run twice (a dead worker's unit requeued) redoes
nothing that was finished, and the records are the same whichever executor ran it.

=================  ==========================================================================================
``memory.session``  build (user, method) up to one session (payload: dataset, user, method, session,
                    method_config?, of?)
``sim.run``         one simulation run, or two compared runs stepped alternately (payload: dataset, specs,
                    pair_id?, method_config?)
``eval.judge``      FairEval of run A against run B on one topic and aspect (payload: dataset, run_a, run_b,
                    user, sample, topic, aspect, k, threshold, temperature?)
``eval.tasks``      the single-turn tasks of one query topic for one method (payload: dataset, user, sample,
                    topic, method, tasks, method_config?)
``sim.fidelity``    simulator-fidelity checks of one stored run (payload: dataset, run_id, config?)
``personamem``      build a method's memory over a PersonaMem-v2 history and answer its items (payload: persona,
                    history, questions, persona_id?, method, seed, limit?, exchanges, forms, judging?)
``synth.generate``  one synthetic user through the PAL-Set pipeline (payload: run_id, rerun_from?)
=================  ==========================================================================================
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from backends.embeddings import Embedder
from backends.llm.client import LLMClient
from backends.llm.errors import Cancelled
from backends.llm.meter import CallMeter, MeterReading
from backends.store.leases import process_holder
from evaluation.simfidelity.store import SimFidelityStore
from evaluation.store import EvalStore, PersonaMemStore
from jobs.units import Registry, UnitContext
from memory.build import MemoryBuilder
from memory.store import logs_stage
from palset.dataset import Dataset, User
from sim.runner import RunElsewhere, Simulation
from sim.store import SimStore
from sim.types import RunSpec
from synth.store import SynthStore


class UnitWorkspace(Protocol):
    """What units use of :class:`studio.workspace.Workspace` (named here: the workspace imports this module to wire
    its job engine, so this module does not import it back)."""

    sims: SimStore
    evals: EvalStore
    simfidelity: SimFidelityStore
    personamem: PersonaMemStore
    synth: SynthStore

    def build_lock(self, build_id: str) -> threading.Lock: ...

    def dataset(self, path: str | Path) -> Dataset: ...

    def embedder(self, name: str | None = None, language: str | None = "en") -> Embedder: ...

    def open_builder(self, dataset: Dataset, user_id: str, method: str, *, llm: LLMClient | None = None,
                     fresh: bool = False, method_config: dict | None = None,
                     embedder: str | None = None) -> MemoryBuilder: ...

    def open_user_builder(self, dataset: str, user: User, method: str, *, llm: LLMClient | None = None,
                          fresh: bool = False, method_config: dict | None = None,
                          embedder: str | None = None, build_id: str | None = None) -> MemoryBuilder: ...

    def open_simulation(self, dataset: Dataset, spec: RunSpec, llm: LLMClient, *, pair_id: str | None = None,
                        builder: MemoryBuilder | None = None) -> Simulation: ...

log = logging.getLogger(__name__)


@dataclass
class UnitEnv:
    """What units of one job run with: the workspace, the job's LLM client, and (in a ``pal`` command's own
    process) callbacks that print progress lines; ``open_user_builder`` may replace the workspace's (tests)."""

    ws: UnitWorkspace
    llm: LLMClient
    line: Callable[[str], None] | None = None
    unit_done: Callable[[str], None] | None = None
    open_user_builder: Callable[..., MemoryBuilder] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def patient(self) -> UnitEnv:
        """This environment with the job's client giving each call a longer deadline: the one retry of a unit
        whose call timed out (:func:`jobs.units.run_patiently`)."""
        return replace(self, llm=self.llm.patient())

    def unwatched(self) -> UnitEnv:
        """This environment for a unit no page watches (a command's foreground run, a Ray worker): the job's
        client makes non-streamed calls (:meth:`backends.llm.client.LLMClient.unwatched`)."""
        return replace(self, llm=self.llm.unwatched())

    def say(self, text: str) -> None:
        if self.line is not None:
            self.line(text)

    def done(self, text: str) -> None:
        if self.unit_done is not None:
            self.unit_done(text)


def _env(ctx: UnitContext) -> UnitEnv:
    env: UnitEnv = ctx.env  # the engine's environment is always a UnitEnv (see Workspace._job_env)
    return env


def builder_for(env: UnitEnv, dataset_path: str, user: str, method: str, method_config: dict | None,
                embedder: str | None = None) -> MemoryBuilder:
    """The build a unit works on: the experiment's (its method config, so its id is fixed by the file), or the
    workspace's reuse policy when no config is given (``pal memory build``, Simulate)."""
    dataset = env.ws.dataset(dataset_path)
    return env.ws.open_builder(dataset, user, method, llm=env.llm, method_config=method_config, embedder=embedder)


# ---------------------------------------------------------------------------------------------- memory


def memory_session(ctx: UnitContext) -> dict:
    """Build (user, method) up to the payload's session; stages already stored are skipped."""
    env, p = _env(ctx), ctx.payload
    builder = builder_for(env, p["dataset"], p["user"], p["method"], p.get("method_config"), p.get("embedder"))
    ids = [s.sample_id for s in builder.user.sessions]
    pos = ids.index(p["session"])
    of = p.get("of") or 2 * len(ids)

    stages_done, last = 0, ""

    def report(reading: MeterReading) -> None:  # after every call's start and end: what is in flight, what is cached
        ctx.progress(stages_done, 2, " · ".join(t for t in (last, reading.line()) if t))

    def progress(done: int, total: int, what: str) -> None:
        nonlocal stages_done, last
        stages_done, last = done - logs_stage(pos), f"{what} done"
        report(builder.meter.reading())
        env.say(f"[{done}/{of}] {what} · {builder.meter.reading().line()}")

    builder.meter.watch(report)
    with env.ws.build_lock(builder.build_id):
        before = len(builder.store.done_stages(builder.build_id))
        builder.run(until_session=pos, progress=progress, cancel=ctx.cancel)
    info = builder.store.info(builder.build_id)
    return {"build_id": builder.build_id, "stages_done": info.stages_done, "new_stages": info.stages_done - before}


# ---------------------------------------------------------------------------------------------- simulation


def open_runs(env: UnitEnv, p: dict) -> list[Simulation]:
    """Open (create or resume) the payload's runs with their memory built up to the topic's session."""
    dataset = env.ws.dataset(p["dataset"])
    sims = []
    for raw in p["specs"]:
        spec = RunSpec.model_validate(raw)
        builder = None
        if spec.method != "vanilla":
            builder = builder_for(env, p["dataset"], spec.user_id, spec.method, p.get("method_config"))
        sims.append(env.ws.open_simulation(dataset, spec, env.llm, pair_id=p.get("pair_id"), builder=builder))
    return sims


def sim_run(ctx: UnitContext) -> dict:
    """Drive the runs to their end, one utterance of each in turn; a failed run fails the unit (every saved
    utterance stays, and a retry continues at the next missing one)."""
    env = _env(ctx)
    sims = open_runs(env, ctx.payload)
    for sim in sims:  # one driver per run: a tab (or another process) driving one of them keeps it
        sim.driver = process_holder(f"job unit {ctx.unit.unit_id}")
    elsewhere: set[str] = set()
    before = {s.record.run_id: len(s.record.utterances) for s in sims}
    was_finished = {s.record.run_id: s.record.status == "finished" for s in sims}
    for sim in sims:
        if sim.assistant.builder is not None:
            b = sim.assistant.builder
            pos = [s.sample_id for s in b.user.sessions].index(sim.record.spec.sample_id)
            with env.ws.build_lock(b.build_id):
                if logs_stage(pos) not in set(b.store.done_stages(b.build_id)):
                    b.run(until_session=pos, cancel=ctx.cancel)
        sim.resume()
    total = sum(max(1, 2 * len(s.record.schedule)) for s in sims)

    def on_token(token: str) -> None:
        ctx.detail += token

    while any(s.record.status == "running" and s.record.run_id not in elsewhere for s in sims):
        for sim in sims:
            if sim.record.status != "running" or sim.record.run_id in elsewhere:
                continue
            if ctx.cancel.is_set():  # stopped between two utterances: every saved one stays, resumable
                for s in sims:
                    if s.record.status == "running":
                        s.stop()
                ctx.check()
            ctx.detail = ""
            try:
                sim.step(on_token=on_token)
            except RunElsewhere as e:  # a person took the run over in a tab: theirs to drive, not a failure
                log.info("simulation %s is driven elsewhere: %s", sim.record.run_id, e)
                elsewhere.add(sim.record.run_id)
            except Exception as e:  # an LLM or simulation error: saved on the run, which stays resumable
                log.info("simulation %s failed: %s", sim.record.run_id, e, exc_info=True)
                sim.fail(f"{type(e).__name__}: {e}" if not str(e) else str(e))
            ctx.progress(sum(len(s.record.utterances) for s in sims), total, sim.record.run_id)
    failed = [s for s in sims if s.record.status == "failed"]
    outcomes = {s.record.run_id: {"status": "skipped" if was_finished[s.record.run_id] else
                                  "elsewhere" if s.record.run_id in elsewhere else s.record.status,
                                  "utterances": len(s.record.utterances),
                                  "written": len(s.record.utterances) - before[s.record.run_id],
                                  "error": s.record.error} for s in sims}
    for run_id, o in outcomes.items():
        env.done(f"{run_id} {o['status']} {o['utterances']} utterances" + (f" ({o['error']})" if o["error"] else ""))
    if failed:
        raise RuntimeError(f"{failed[0].record.run_id}: {failed[0].record.error}")
    return {"runs": outcomes}


# ---------------------------------------------------------------------------------------------- evaluation


def eval_judge(ctx: UnitContext) -> dict:
    """One FairEval judgment (loaded when a judgment with the same key is stored)."""
    from evaluation.faireval import judge_pair, planned_key
    from evaluation.service import topic_context

    env, p = _env(ctx), ctx.payload
    store = env.ws.evals
    dataset = env.ws.dataset(p["dataset"])
    key = planned_key(p["run_a"], p["run_b"], p["aspect"], p["k"], env.llm.config.role("judge").model,
                      dataset.users[p["user"]].language, temperature=p.get("temperature"), seed=p.get("seed"),
                      prompts=p.get("prompts"))
    what = f"{p['user']} {p['sample']} {p['topic']} {p['aspect']}"
    if store.has_judgment(key):
        env.done(f"{what}: stored")
        return {"judgment_key": key, "decision": store.load_judgment(key).decision, "stored": True}
    ctx_topic = topic_context(dataset, p["user"], p["sample"], p["topic"])
    j = judge_pair(env.llm.for_run(key), ctx_topic, env.ws.sims.load(p["run_a"]), env.ws.sims.load(p["run_b"]),
                   p["aspect"], k=p["k"], threshold=p.get("threshold", 0.0),
                   temperature=p.get("temperature"), seed=p.get("seed"),
                   prompts=p.get("prompts"))  # its calls, accounted to the judgment
    store.save_judgment(j)
    env.done(f"{what}: {j.decision}")
    return {"judgment_key": j.judgment_key, "decision": j.decision, "stored": False}


def eval_tasks(ctx: UnitContext) -> dict:
    """The single-turn tasks of one topic for one method; stored results are reused."""
    from evaluation.service import topic_context
    from evaluation.tasks import TopicTasks

    env, p = _env(ctx), ctx.payload
    dataset = env.ws.dataset(p["dataset"])
    builder = None if p["method"] == "vanilla" else builder_for(env, p["dataset"], p["user"], p["method"],
                                                                 p.get("method_config"))
    topic = topic_context(dataset, p["user"], p["sample"], p["topic"])
    from palset.dataset import dataset_key

    runner = TopicTasks(env.llm, topic, p["method"], builder, dataset_key(dataset.root))
    results = runner.run(tuple(p["tasks"]), known=lambda _t, k: env.ws.evals.get_result(k))
    for r in results:
        env.ws.evals.save_result(r)
    env.done(f"{p['method']} {p['user']} {p['sample']} {p['topic']}")
    return {"results": [r.result_key for r in results]}


def sim_fidelity(ctx: UnitContext) -> dict:
    """The simulator-fidelity checks of one stored run (a stored result of the same measurement is reused)."""
    from evaluation.simfidelity.service import matchers, measure_run
    from evaluation.simfidelity.types import SimFidelityConfig

    env, p = _env(ctx), ctx.payload
    config = SimFidelityConfig.model_validate(p.get("config") or {})
    uses_judge = config.classifier == "judge" or config.persona_judge
    result = measure_run(env.ws.sims.load(p["run_id"]), env.ws.dataset(p["dataset"]),
                         matchers(lambda language: env.ws.embedder(None, language), config.threshold),
                         env.ws.simfidelity, config=config, llm=env.llm.for_run(p["run_id"]) if uses_judge else None)
    env.done(f"{p['run_id']}: simulator checks" + (f" ({result.no_gold})" if result.no_gold else ""))
    return {"key": result.key, "passed": result.passed, "no_gold": result.no_gold}


def personamem(ctx: UnitContext) -> dict:
    """Build a method's memory over a PersonaMem-v2 history, answer the items, store the records."""
    from evaluation.personamem.evaluate import Judging, PersonaMemEval, judge_context
    from evaluation.personamem.loader import history_key, history_user, load_history, read_questions

    env, p = _env(ctx), ctx.payload
    history = load_history(p["history"])
    items = read_questions(p["questions"], p.get("persona_id")).evaluable
    items = items[: p["limit"]] if p.get("limit") else items
    user = history_user(history, exchanges_per_session=p["exchanges"])
    key = history_key(history, p["exchanges"])
    opener = env.open_user_builder or (lambda d, u, m, llm: env.ws.open_user_builder(d, u, m, llm=llm))
    builder = opener(key, user, p["method"], env.llm)

    def progress(done: int, total: int, what: str) -> None:
        ctx.check()
        env.say(f"[{done}/{total}] {what}")

    builder.run(progress=progress, cancel=ctx.cancel)
    judging = Judging.model_validate(p.get("judging") or {})
    context = judge_context([(m.role, m.content) for m in history.chat_history])  # the released judge's context
    records = PersonaMemEval(env.llm, builder, p["method"], seed=p["seed"], judging=judging, context=context).run(
        items, tuple(p["forms"]), progress)
    stored = env.ws.personamem.save(records, key)
    env.extra.setdefault("personamem_records", []).extend(records)
    return {"records": stored, "history_key": key}


# ---------------------------------------------------------------------------------------------- synthesis


def synth_generate(ctx: UnitContext) -> dict:
    """One generation run through the pipeline (finished steps are kept; a re-run continues)."""
    from synth.pipeline import Pipeline

    env, p = _env(ctx), ctx.payload
    hooks = env.extra.get("synth_hooks", {})
    on_step = hooks.get("on_step")
    on_call = hooks.get("on_call")

    def step_event(step: str, event: str, record: Any) -> None:
        ctx.report(0.0, f"{step}: {event}")
        if on_step is not None:
            on_step(p["run_id"])(step, event, record)

    meter, doing = CallMeter(), [""]

    def show(reading: MeterReading) -> None:  # the call being made, what is in flight and since when
        ctx.detail = " · ".join(t for t in (doing[0], reading.line()) if t)

    def call_event(step: str, unit: str) -> None:
        doing[0] = f"{step} {unit}"
        show(meter.reading())
        if on_call is not None:
            on_call(p["run_id"])(step, unit)

    meter.watch(show)
    pipe = Pipeline(p["run_id"], env.ws.synth, env.llm.metered(meter), on_step=step_event, on_call=call_event,
                    cancel=ctx.cancel)
    if p.get("rerun_from"):
        pipe.invalidate(p["rerun_from"])
    info = pipe.info if pipe.info.status == "finished" else pipe.run()
    if info.status == "cancelled" or ctx.cancel.is_set() and info.status != "finished":
        raise Cancelled(f"generation {p['run_id']} cancelled")
    if info.status != "finished":
        raise RuntimeError(f"generation {p['run_id']} {info.status}: {info.error}")
    return {"run_id": p["run_id"], "uid": info.uid, "status": info.status}


# ---------------------------------------------------------------------------------------------- registry


def wants_gpu(payload: dict) -> bool:
    """PLUM trains a LoRA adapter per session: its units ask for a GPU where the executor has one."""
    methods = [payload.get("method")] + [s.get("method") for s in payload.get("specs", [])]
    return "plum" in methods


def build_registry() -> Registry:
    registry = Registry()
    registry.register("memory.session", memory_session, wants_gpu)
    registry.register("sim.run", sim_run, wants_gpu)
    registry.register("eval.judge", eval_judge)
    registry.register("eval.tasks", eval_tasks, wants_gpu)
    registry.register("sim.fidelity", sim_fidelity)
    registry.register("personamem", personamem, wants_gpu)
    registry.register("synth.generate", synth_generate)
    return registry
