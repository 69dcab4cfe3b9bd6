"""Create or resume a simulation run for (dataset, user, topic, method) with the platform's real parts."""

from __future__ import annotations

from backends.llm.client import LLMClient
from backends.prompts import load_prompt
from memory.build import MemoryBuilder
from memory.methods import get_method_class
from palset.dataset import Dataset, dataset_key
from sim.assistant import Assistant
from sim.reference import AlwaysAcceptSimulator, RandomVerdictSimulator, ReplaySimulator, topic_turns
from sim.runner import Simulation
from sim.schedule import fixed_schedule
from sim.simulator import TopicContext, UserSimulator
from sim.store import SimStore, run_id_for
from sim.style import PROMPT as STYLE_PROMPT
from sim.style import earlier_turns, style_fragment, style_profile
from sim.types import RunRecord, RunSpec, UserSide


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
    simulator, sim_settings = user_side(spec, ctx, llm)
    if isinstance(simulator, ReplaySimulator):
        schedule, source = simulator.schedule(), "the dataset's dialogue of this topic (replay simulator)"
    assistant = Assistant(llm, ctx, builder, cls.label)
    settings = {"user_simulator": sim_settings,
                "assistant": {"provider": assistant.llm.config.role("assistant").provider,
                              "model": assistant.llm.config.role("assistant").model,
                              "temperature": assistant.llm.config.role("assistant").temperature}}
    record = store.create(RunRecord(run_id=run_id_for(spec), spec=spec, schedule=schedule, schedule_source=source,
                                    settings=settings, pair_id=pair_id))
    return Simulation(record=record, ctx=ctx, store=store, simulator=simulator, assistant=assistant)


def user_side(spec: RunSpec, ctx: TopicContext, llm: LLMClient) -> tuple[UserSide, dict[str, object]]:
    """The user side the spec asks for, and what the run records of it (its settings: no keys)."""
    if spec.simulator == "replay":
        turns = topic_turns(ctx.session, spec.topic_key)
        if not turns:
            raise SimulationSetupError(f"{spec.sample_id} {spec.topic_key}: the dataset's dialogue does not split into "
                                       "its topics (one Topic Inquiry each), so there is nothing to replay")
        return ReplaySimulator(turns), {"simulator": "replay", "provider": "reference", "model": "replay"}
    if spec.simulator in ("always-accept", "random-verdict"):
        kind = AlwaysAcceptSimulator if spec.simulator == "always-accept" else RandomVerdictSimulator
        opening = spec.free_query or ctx.topic.topic.user_query
        return (kind(opening, ctx.user.language, spec.seed),
                {"simulator": spec.simulator, "provider": "reference", "model": spec.simulator})
    role = llm.config.role("user_simulator")
    settings: dict[str, object] = {"simulator": "llm", "provider": role.provider, "model": role.model,
                                   "temperature": role.temperature}
    style = None
    if spec.user_style:
        prompt = load_prompt(STYLE_PROMPT)
        profile = style_profile(earlier_turns(ctx.user, ctx.session), ctx.user.language)
        style = style_fragment(profile, prompt)
        settings["user_style"] = {"prompt": prompt.name, "version": prompt.version, "earlier_turns": profile.turns}
    return UserSimulator(llm, ctx, spec.mode == "free", style=style), settings
