"""From an experiment to job units, with what they will cost: LLM calls, tokens, USD and time per task and method.

Calls are counted from the protocol (a dialogue's fixed schedule, 2k judge samples, one call per single-turn task
plus the G-score judge); a memory build's calls per session come from the builds already stored for that method
(a pilot run calibrates them), else from measured rates per session and log (``protocol/plan_rates.toml``, each
figure with where it was measured). Tokens and seconds per call come from the calls already accounted per prompt
(:meth:`backends.store.runstore.RunStore.prompt_means`), else from defaults; each row says which (``calibrated``
or ``static``).

Time is the longest of three bounds: a list-scheduling of the units over the configured concurrency that respects
their order (a user's sessions one after another), each call taking its endpoint time plus the app's own CPU for
it; the **endpoint-bound** time (each endpoint's calls × seconds per call ÷ the requests it serves at once, and its
requests/min); and the **app-bound** time (calls × the app's CPU per call: one process runs its units' own work on
about one core). The app's CPU per call is measured from this home's recorded job runs, else taken from the rates
file.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

from pydantic import BaseModel

from backends.config import PlatformConfig
from evaluation.service import query_topics
from jobs.types import JobSpec, UnitSpec
from memory.methods import get_method_class
from palset.dataset import Dataset
from protocol.calibration import DEFAULT_CALL, RATES_FILE, Calibration, static_session_calls
from protocol.config import SINGLE_TURN, ExperimentConfig
from protocol.units import build_units, fidelity_units, judge_units, sim_units, task_units
from sim.schedule import fixed_schedule
from sim.service import make_spec
from sim.types import RunSpec, parse_variant

TYPICAL_LOGS = 25  # logs per session the claim order ranks methods at (only their order matters)
TASK_PROMPTS = {"restatement": ["eval/requirement_restatement", "eval/gscore"], "proposal": ["eval/solution_proposal"],
                "selection": ["eval/solution_selection"]}
PROMPT_ROLE = {"sim/user_simulator": "user_simulator", "sim/assistant": "assistant", "sim/query_summary": "assistant",
               "eval/gscore": "judge", "eval/faireval_requirement": "judge", "eval/faireval_preference": "judge",
               "build": "memory_builder"}


class PlanRow(BaseModel):
    """One task and method: how many units, and the estimated calls, tokens, cost and LLM seconds."""

    task: str
    method: str
    units: int
    calls: float
    tokens_in: float
    tokens_out: float
    usd: float | None
    unpriced: list[str] = []
    seconds: float
    basis: str  # calibrated | static | none (no LLM)


class Plan(BaseModel):
    job: JobSpec
    rows: list[PlanRow]
    kind_seconds: dict[str, float] = {}  # unit kind → estimated seconds per unit (for the run's ETA)
    wall_seconds: float  # the longest of the three bounds below
    concurrency: int
    notes: list[str] = []
    schedule_seconds: float = 0.0  # the units list-scheduled over the concurrency, each call with the app's CPU
    endpoint_seconds: float = 0.0  # the busiest endpoint: its calls' seconds ÷ what it serves at once, or its rate
    endpoint: str = ""  # which endpoint that is
    app_seconds: float = 0.0  # calls × the app's CPU per call (one process: about one core)
    app_cpu_per_call: float = 0.0
    app_cpu_measured: bool = False  # measured from this home's job runs (else the rates file's figure)

    @property
    def bound(self) -> str:
        """What bounds the wall time: ``endpoint``, ``app`` or ``schedule`` (the units' order and concurrency)."""
        top = max(self.endpoint_seconds, self.app_seconds, self.schedule_seconds)
        return "endpoint" if top == self.endpoint_seconds else "app" if top == self.app_seconds else "schedule"

    def total(self, field_name: str) -> float:
        return float(sum(getattr(r, field_name) or 0 for r in self.rows))


@dataclass
class UnitCost:
    calls: dict[str, float] = field(default_factory=dict)  # role → calls
    tokens: dict[str, list[float]] = field(default_factory=dict)  # role → [in, out]
    seconds: float = 0.0
    calibrated: bool = True
    role_seconds: dict[str, float] = field(default_factory=dict)  # role → the endpoint's seconds for its calls

    def add(self, role: str, calls: float, tin: float, tout: float, secs: float, calibrated: bool) -> None:
        self.calls[role] = self.calls.get(role, 0.0) + calls
        self.role_seconds[role] = self.role_seconds.get(role, 0.0) + calls * secs
        acc = self.tokens.setdefault(role, [0.0, 0.0])
        acc[0] += calls * tin
        acc[1] += calls * tout
        self.seconds += calls * secs
        self.calibrated = self.calibrated and calibrated


def selected_users(exp: ExperimentConfig, dataset: Dataset) -> list[str]:
    users = sorted(dataset.users) if exp.users == "all" else list(exp.users)
    missing = [u for u in users if u not in dataset.users]
    if missing:
        raise ValueError(f"users: no user {missing[0]!r} in {dataset.root}")
    return users


def topics_of(exp: ExperimentConfig, dataset: Dataset, users: list[str]) -> list[tuple[str, str, str]]:
    """The topics the tasks run on: every query-session topic (or every session's), the first
    ``topics_per_user`` of each user when set."""
    if exp.topics == "query":
        topics = query_topics(dataset, users)
    else:
        topics = [(u, s.sample_id, t.key) for u in users for s in dataset.users[u].sessions for t in s.topics]
    if exp.topics_per_user is None:
        return topics
    kept: dict[str, int] = {}
    out = []
    for u, s, t in topics:
        if kept.get(u, 0) < exp.topics_per_user:
            kept[u] = kept.get(u, 0) + 1
            out.append((u, s, t))
    return out


def dialogue_specs(exp: ExperimentConfig, dataset: Dataset, topics: list[tuple[str, str, str]]) -> list[RunSpec]:
    variants = [parse_variant(v) for v in exp.simulators]
    return [make_spec(dataset, u, s, t, m, mode="fixed", seed=seed, simulator=kind, user_style=style)
            for kind, style in variants for seed in exp.seeds for u, s, t in topics for m in exp.all_methods]


def build_job(exp: ExperimentConfig, dataset: Dataset) -> JobSpec:
    """The experiment's units: builds, single-turn tasks, dialogues, judgments (ids stable for a file)."""
    users = selected_users(exp, dataset)
    topics = topics_of(exp, dataset, users)
    tasks = exp.available_tasks()
    mc: dict = {}
    units: list[UnitSpec] = []
    if "build" in tasks:
        last = {u: max((p for p, s in enumerate(dataset.users[u].sessions) if (u, s.sample_id) in
                        {(x, y) for x, y, _ in topics}), default=len(dataset.users[u].sessions) - 1) for u in users}
        units += [x for u in users for m in exp.all_methods if m != "vanilla"
                  for x in build_units(dataset, u, m, last[u], mc)]
    single = [t for t in tasks if t in SINGLE_TURN]
    if single:
        units += task_units(dataset, topics, exp.all_methods, single, mc, builds="build" not in tasks)
    specs = dialogue_specs(exp, dataset, topics) if "dialogue" in tasks else []
    if specs:
        units += sim_units(dataset, specs, mc, builds="build" not in tasks and not single)
    if "faireval" in tasks:
        by_key = {(s.simulator_variant, s.user_id, s.sample_id, s.topic_key, s.seed, s.method): s for s in specs}
        pairs = [(by_key[(v, u, s, t, seed, m)], by_key[(v, u, s, t, seed, exp.baseline)])
                 for v in exp.simulators for seed in exp.seeds for u, s, t in topics for m in exp.methods]
        units += judge_units(dataset, pairs, exp.aspects, exp.k, exp.threshold, after_sims=True)
    if "simulator-fidelity" in tasks:
        units += fidelity_units(dataset, specs, exp.simulator_fidelity.model_dump())
    seen: dict[str, UnitSpec] = {}
    for u in sorted(units, key=_longest_chains_first):
        seen.setdefault(u.key, u)
    return JobSpec(job_id=exp.job_id(), kind="experiment", title=f"experiment {exp.name}", created_by="cli",
                   pool="cli", config=exp.job_config(), units=list(seen.values()))


def _longest_chains_first(unit: UnitSpec) -> tuple[int, float]:
    """Claim order (stable): memory builds first, the methods with the most calls per session first — their chains
    are the job's critical path, so starting them early keeps every worker busy to the end."""
    if unit.kind != "memory.session":
        return (1, 0.0)
    method = unit.payload["method"]
    calls = static_session_calls(method, TYPICAL_LOGS) if get_method_class(method).uses_llm else 0.0
    return (0, -calls)


def unit_cost(unit: UnitSpec, dataset: Dataset, cal: Calibration) -> tuple[str, str, UnitCost]:
    """(task, method, cost) of one unit."""
    p, cost = unit.payload, UnitCost()
    if unit.kind == "memory.session":
        cls = get_method_class(p["method"])
        if not cls.uses_llm:
            return "build", p["method"], UnitCost(calibrated=True)
        if p["method"] in cal.sessions:
            calls, tin, tout, secs = cal.sessions[p["method"]]
            cost.add("memory_builder", calls, tin / max(calls, 1e-9), tout / max(calls, 1e-9),
                     secs / max(calls, 1e-9), True)
        else:
            session = next(x for x in dataset.users[p["user"]].sessions if x.sample_id == p["session"])
            cost.add("memory_builder", static_session_calls(p["method"], len(session.logs)), *DEFAULT_CALL, False)
        return "build", p["method"], cost
    if unit.kind == "eval.tasks":
        for task in p["tasks"]:
            for prompt in TASK_PROMPTS[task]:
                cost.add(PROMPT_ROLE.get(prompt, "assistant"), 1, *cal.call(prompt))
        return "+".join(p["tasks"]), p["method"], cost
    if unit.kind == "sim.run":
        spec = RunSpec.model_validate(p["specs"][0])
        turns = len(fixed_schedule(dataset, f"{spec.sample_id}_{spec.topic_key}")[0])
        prompts = ["sim/user_simulator", "sim/assistant"] if spec.simulator == "llm" else ["sim/assistant"]
        if spec.method != "vanilla" and getattr(get_method_class(spec.method), "uses_query", True):
            prompts.append("sim/query_summary")
        for prompt in prompts:
            cost.add(PROMPT_ROLE[prompt], turns, *cal.call(prompt))
        return "dialogue", spec.method, cost
    if unit.kind == "sim.fidelity":
        config, checked = p.get("config") or {}, RunSpec.model_validate(p["spec"])
        turns = len(fixed_schedule(dataset, f"{checked.sample_id}_{checked.topic_key}")[0])
        for name, on in (("eval/sim_stance", config.get("classifier") == "judge"),
                         ("eval/sim_persona", bool(config.get("persona_judge")))):
            if on:  # at most one call per user turn
                cost.add("judge", turns, *cal.call(name))
        return "simulator-fidelity", checked.method, cost
    if unit.kind == "eval.judge":
        cost.add("judge", 2 * p["k"], *cal.call(judge_prompt_name(p, dataset)))
        return "faireval", unit.label.split(" ")[1], cost
    return unit.kind, "", cost


def judge_prompt_name(payload: dict, dataset: Dataset) -> str:
    """The judge prompt an ``eval.judge`` unit sends — its prompt set, in its user's language — whose calls in this
    home calibrate its estimate (the static estimate until there are some)."""
    from evaluation.faireval import prompt_set

    user = dataset.users.get(payload["user"])
    return prompt_set(payload.get("prompts")).prompt(payload["aspect"], user.language if user else None).name


def make_plan(exp: ExperimentConfig, dataset: Dataset, config: PlatformConfig, cal: Calibration) -> Plan:
    """The job and, per task and method, its estimated calls, tokens, cost and LLM seconds; the wall time at
    ``exp.concurrency``."""
    job = build_job(exp, dataset)
    cpu, cpu_measured = cal.cpu_per_call
    rows: dict[tuple[str, str], dict] = {}
    durations: dict[str, float] = {}
    calls_by_role: dict[str, float] = defaultdict(float)
    seconds_by_role: dict[str, float] = defaultdict(float)
    for unit in job.units:
        task, method, cost = unit_cost(unit, dataset, cal)
        durations[unit.key] = cost.seconds + cpu * sum(cost.calls.values())
        row = rows.setdefault((task, method), {"units": 0, "calls": 0.0, "tin": 0.0, "tout": 0.0, "s": 0.0,
                                               "by_model": defaultdict(lambda: [0, 0]), "cal": True, "llm": False})
        row["units"] += 1
        row["s"] += cost.seconds
        row["cal"] = row["cal"] and cost.calibrated
        for role, n in cost.calls.items():
            row["llm"] = row["llm"] or n > 0
            calls_by_role[role] += n
            seconds_by_role[role] += cost.role_seconds.get(role, 0.0)
            tin, tout = cost.tokens[role]
            row["calls"] += n
            row["tin"] += tin
            row["tout"] += tout
            acc = row["by_model"][config.role(role).model]
            acc[0] += int(tin)
            acc[1] += int(tout)
    out = []
    for (task, method), r in rows.items():
        est = config.estimate({m: (a[0], a[1]) for m, a in r["by_model"].items()})
        out.append(PlanRow(task=task, method=method, units=r["units"], calls=r["calls"], tokens_in=r["tin"],
                           tokens_out=r["tout"], usd=est.usd if not est.unpriced else None, unpriced=est.unpriced,
                           seconds=r["s"], basis=("calibrated" if r["cal"] else "static") if r["llm"] else "none"))
    scheduled = schedule_time(job.units, durations, exp.concurrency)
    per_kind: dict[str, list[float]] = defaultdict(list)
    for unit in job.units:
        per_kind[unit.kind].append(durations[unit.key])
    kind_seconds = {k: sum(v) / len(v) for k, v in per_kind.items()}
    notes = [f"{t}: {why}" for t, why in exp.unavailable().items()]
    endpoint, endpoint_s, rate_note = endpoint_bound(config, exp.concurrency, calls_by_role, seconds_by_role)
    if rate_note and endpoint_s >= scheduled:
        notes.append(rate_note)
    app_s = cpu * sum(calls_by_role.values())
    return Plan(job=job, rows=out, wall_seconds=max(scheduled, endpoint_s, app_s), concurrency=exp.concurrency,
                notes=notes, kind_seconds=kind_seconds, schedule_seconds=scheduled, endpoint_seconds=endpoint_s,
                endpoint=endpoint, app_seconds=app_s, app_cpu_per_call=cpu, app_cpu_measured=cpu_measured)


def endpoint_bound(config: PlatformConfig, concurrency: int, calls_by_role: dict[str, float],
                   seconds_by_role: dict[str, float]) -> tuple[str, float, str]:
    """(the busiest endpoint, its seconds, a note when its requests/min rather than its concurrency bound them): an
    endpoint serving ``c`` requests at once needs its calls' seconds ÷ ``c`` (``c``: its configured concurrency,
    else the experiment's), and at least calls ÷ requests/min."""
    per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for role, n in calls_by_role.items():
        url = (config.role(role).base_url or config.role(role).provider).rstrip("/")
        per[url][0] += n
        per[url][1] += seconds_by_role.get(role, 0.0)
    best = ("", 0.0, "")
    limits = {k.rstrip("/"): v for k, v in config.limits.items()}
    for url, (calls, secs) in per.items():
        lim = limits.get(url)
        served = secs / max(1, (lim.concurrency if lim and lim.concurrency else concurrency))
        rated = 60.0 * calls / lim.requests_per_minute if lim and lim.requests_per_minute else 0.0
        if max(served, rated) > best[1]:
            note = f"{url}: {lim.requests_per_minute} requests/min bound the time" if lim and rated > served else ""
            best = (url, max(served, rated), note)
    return best


def schedule_time(units: list[UnitSpec], durations: dict[str, float], concurrency: int) -> float:
    """Seconds to run ``units`` on ``concurrency`` workers, each taking the first runnable unit in order
    (as the engine does), a unit runnable once its dependencies are done."""
    waiting = {u.key: set(u.deps) for u in units}
    order = {u.key: i for i, u in enumerate(units)}
    dependants: dict[str, list[str]] = defaultdict(list)
    for u in units:
        for d in u.deps:
            dependants[d].append(u.key)
    ready = [order[k] for k, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    keys = [u.key for u in units]
    running: list[tuple[float, str]] = []
    now = 0.0
    while ready or running:
        while ready and len(running) < concurrency:
            key = keys[heapq.heappop(ready)]
            heapq.heappush(running, (now + durations.get(key, 0.0), key))
        now, key = heapq.heappop(running)
        for nxt in dependants[key]:
            waiting[nxt].discard(key)
            if not waiting[nxt]:
                heapq.heappush(ready, order[nxt])
    return now


def time_lines(plan: Plan) -> list[str]:
    """The plan's time and its three bounds, as ``pal experiment plan`` and the Experiments page say them."""
    from jobs.types import format_seconds

    cpu = (f"{plan.app_cpu_per_call * 1000:.1f} ms of the app's CPU per call, "
           + ("measured from this home's job runs" if plan.app_cpu_measured else f"assumed ({RATES_FILE.name})"))
    return [f"about {format_seconds(plan.wall_seconds)} at concurrency {plan.concurrency}, bound by the {plan.bound}",
            f"endpoint-bound: {format_seconds(plan.endpoint_seconds)} ({plan.endpoint or 'no endpoint'}: its calls' "
            "seconds over the requests it serves at once)",
            f"app-bound: {format_seconds(plan.app_seconds)} ({cpu})",
            f"schedule: {format_seconds(plan.schedule_seconds)} (the units in order over concurrency "
            f"{plan.concurrency}, each call with the app's CPU)"]
