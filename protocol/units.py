"""Units for the protocol's tasks, shared by the ``pal`` commands, the pages and experiments.

A memory build is a chain of ``memory.session`` units (each after the previous: a user's sessions build in time
order) while different users' chains run in parallel; simulations, single-turn tasks and judgments depend on the
build units they read, so no two units ever build the same memory at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jobs.types import UnitSpec
from palset.dataset import Dataset
from sim.store import run_id_for
from sim.types import RunSpec


def build_key(user: str, method: str, pos: int) -> str:
    return f"build/{user}/{method}/{pos}"


def build_units(dataset: Dataset, user: str, method: str, until: int | None = None,
                method_config: dict | None = None, embedder: str | None = None) -> list[UnitSpec]:
    """One unit per session of ``user`` up to position ``until`` (default: every session), chained."""
    sessions = dataset.users[user].sessions
    last = len(sessions) - 1 if until is None else min(until, len(sessions) - 1)
    return [UnitSpec(key=build_key(user, method, pos), kind="memory.session",
                     label=f"build {method} {user} {sessions[pos].sample_id}",
                     deps=[build_key(user, method, pos - 1)] if pos else [],
                     payload={"dataset": str(dataset.root), "user": user, "method": method,
                              "session": sessions[pos].sample_id, "of": 2 * (last + 1), "method_config": method_config,
                              "embedder": embedder})
            for pos in range(last + 1)]


def session_position(dataset: Dataset, user: str, sample_id: str) -> int:
    return [s.sample_id for s in dataset.users[user].sessions].index(sample_id)


def needed_builds(dataset: Dataset, pairs: Iterable[tuple[str, str, str]], method_config: dict | None = None
                  ) -> tuple[list[UnitSpec], dict[tuple[str, str, str], str]]:
    """Build units for every (user, method, session) a task reads (vanilla reads none), and for each of those
    the key of the build unit it must wait for."""
    furthest: dict[tuple[str, str], int] = {}
    needs: dict[tuple[str, str, str], int] = {}
    for user, method, sample_id in pairs:
        if method == "vanilla":
            continue
        pos = session_position(dataset, user, sample_id)
        furthest[(user, method)] = max(furthest.get((user, method), -1), pos)
        needs[(user, method, sample_id)] = pos
    units = [u for (user, method), pos in sorted(furthest.items())
             for u in build_units(dataset, user, method, pos, method_config)]
    return units, {k: build_key(k[0], k[1], pos) for k, pos in needs.items()}


def sim_units(dataset: Dataset, specs: list[RunSpec], method_config: dict | None = None,
              builds: bool = True) -> list[UnitSpec]:
    """A ``sim.run`` unit per spec, after the build units of its memory (added too when ``builds``)."""
    pre, dep = needed_builds(dataset, [(s.user_id, s.method, s.sample_id) for s in specs], method_config)
    units = [UnitSpec(key=sim_key(s), kind="sim.run", label=run_id_for(s),
                      deps=[d] if (d := dep.get((s.user_id, s.method, s.sample_id))) else [],
                      payload={"dataset": str(dataset.root), "specs": [s.model_dump()], "method_config": method_config})
             for s in specs]
    return (pre if builds else []) + units


def sim_key(spec: RunSpec) -> str:
    return f"sim/{run_id_for(spec)}"


def task_units(dataset: Dataset, topics: list[tuple[str, str, str]], methods: list[str], tasks: list[str],
               method_config: dict | None = None, builds: bool = True) -> list[UnitSpec]:
    """An ``eval.tasks`` unit per (method, query topic), after the build units of its memory."""
    pre, dep = needed_builds(dataset, [(u, m, s) for m in methods for u, s, _t in topics], method_config)
    units = [UnitSpec(key=f"tasks/{m}/{u}/{s}/{t}", kind="eval.tasks", label=f"{m} {u} {s} {t}",
                      deps=[d] if (d := dep.get((u, m, s))) else [],
                      payload={"dataset": str(dataset.root), "user": u, "sample": s, "topic": t, "method": m,
                               "tasks": list(tasks), "method_config": method_config})
             for m in methods for u, s, t in topics]
    return (pre if builds else []) + units


def judge_units(dataset: Dataset, pairs: list[tuple[RunSpec, RunSpec]], aspects: Sequence[str], k: int,
                threshold: float = 0.0, after_sims: bool = False, temperature: float | None = None,
                seed: int | None = None, prompts: str | None = None) -> list[UnitSpec]:
    """An ``eval.judge`` unit per (pair of runs, aspect); ``after_sims``: each waits for its two sim units;
    ``temperature``: the judge samples' (None: FairEval's default for k, see
    :func:`evaluation.faireval.sampling_temperature`); ``seed``: the base sampling seed; ``prompts``: the judge
    prompt set (None: the default)."""
    given = {"temperature": temperature, "seed": seed, "prompts": prompts}
    extra = {name: value for name, value in given.items() if value is not None}
    return [UnitSpec(key=f"judge/{run_id_for(a)}/{run_id_for(b)}/{aspect}", kind="eval.judge",
                     label=f"judge {a.method} vs {b.method} {a.user_id} {a.sample_id} {a.topic_key} {aspect}",
                     deps=[sim_key(a), sim_key(b)] if after_sims else [],
                     payload={"dataset": str(dataset.root), "run_a": run_id_for(a), "run_b": run_id_for(b),
                              "user": a.user_id, "sample": a.sample_id, "topic": a.topic_key, "aspect": aspect,
                              "k": k, "threshold": threshold, **extra})
            for a, b in pairs for aspect in aspects]


def fidelity_units(dataset: Dataset, specs: list[RunSpec], config: dict | None = None) -> list[UnitSpec]:
    """A ``sim.fidelity`` unit per run, after the run's ``sim.run`` unit."""
    return [UnitSpec(key=f"simfid/{run_id_for(s)}", kind="sim.fidelity", label=f"simfid {s.method} {run_id_for(s)}",
                     deps=[sim_key(s)], payload={"dataset": str(dataset.root), "run_id": run_id_for(s), "config": config,
                                                  "spec": s.model_dump()})
            for s in specs]
