"""Create or resume a simulation run for (dataset, user, topic, method) with the platform's real parts."""

from __future__ import annotations

from backends.llm.client import LLMClient
from memory.build import MemoryBuilder
from memory.methods import get_method_class
from palset.dataset import Dataset, dataset_key
from sim.roles import Assistant, TopicContext, UserSimulator
from sim.runner import Simulation
from sim.schedule import fixed_schedule
from sim.store import SimStore, run_id_for
from sim.types import RunRecord, RunSpec


class SimulationSetupError(ValueError):
    """The spec names a user, session or topic the dataset does not have."""


def make_spec(dataset: Dataset, user_id: str, sample_id: str, topic_key: str, method: str, **kw) -> RunSpec:
    return RunSpec(dataset=dataset_key(dataset.root), user_id=user_id, sample_id=sample_id, topic_key=topic_key,
                   method=method, **kw)


def open_simulation(dataset: Dataset, spec: RunSpec, llm: LLMClient, *, store: SimStore,
                    builder: MemoryBuilder | None = None, pair_id: str | None = None) -> Simulation:
    """The run for ``spec``: created when new, resumed as stored otherwise.

    ``llm`` should be scoped to the run (:meth:`LLMClient.for_run`); ``builder`` is the method's memory
    (required for every method but ``vanilla``; :meth:`studio.workspace.Workspace.open_simulation` opens it)."""
    user = dataset.users.get(spec.user_id)
    if user is None:
        raise SimulationSetupError(f"no user {spec.user_id!r}")
    session = user.session(spec.sample_id)
    if session is None:
        raise SimulationSetupError(f"user {spec.user_id} has no session {spec.sample_id!r}")
    topic = next((t for t in session.topics if t.key == spec.topic_key), None)
    if topic is None:
        raise SimulationSetupError(f"session {spec.sample_id} has no {spec.topic_key!r}")
    cls = get_method_class(spec.method)
    task_id = f"{spec.sample_id}_{spec.topic_key}"
    schedule, source = fixed_schedule(dataset, task_id) if spec.mode == "fixed" else ([], "free mode")
    if builder is None and spec.method != "vanilla":
        raise SimulationSetupError(f"method {spec.method!r} needs its memory builder (open it with the workspace)")
    ctx = TopicContext(user=user, session=session, topic=topic, free_query=spec.free_query)
    assistant = Assistant(llm, ctx, builder, cls.label)
    settings = {role: {"provider": client.config.role(role).provider, "model": client.config.role(role).model,
                       "temperature": client.config.role(role).temperature}
                for role, client in (("user_simulator", llm), ("assistant", assistant.llm))}
    record = store.create(RunRecord(run_id=run_id_for(spec), spec=spec, schedule=schedule, schedule_source=source,
                                    settings=settings, pair_id=pair_id))
    return Simulation(record=record, ctx=ctx, store=store, simulator=UserSimulator(llm, ctx, spec.mode == "free"),
                      assistant=assistant)
