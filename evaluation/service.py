"""Batch drivers: pair finished runs and judge them, run the single-turn tasks — both resumable."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from backends.llm.client import LLMClient
from evaluation.faireval import Aspect, Judgment, judge_pair, planned_key
from evaluation.store import EvalStore
from evaluation.tasks import TASKS, Task, TaskResult, TopicTasks
from memory.build import BuilderOpener, MemoryBuilder
from palset.dataset import Dataset, dataset_key
from sim.simulator import TopicContext
from sim.store import SimStore

Progress = Callable[[int, int, str], None]


@dataclass
class RunPair:
    """Finished runs of methods A and B on the same (user, sample, topic)."""

    user_id: str
    sample_id: str
    topic_key: str
    run_a: str
    run_b: str


def pair_runs(sims: SimStore, dataset: str, method_a: str, method_b: str,
              users: Iterable[str] | None = None) -> list[RunPair]:
    """Pairs by (user, sample, topic); the newest finished run of each method is used."""
    wanted = set(users) if users else None

    def newest(method: str) -> dict[tuple[str, str, str], str]:
        found: dict[tuple[str, str, str], str] = {}
        for r in sims.list(dataset=dataset, method=method, status="finished"):  # newest first
            key = (r["user_id"], r["sample_id"], r["topic_key"])
            if (wanted is None or r["user_id"] in wanted) and key not in found:
                found[key] = r["run_id"]
        return found

    a, b = newest(method_a), newest(method_b)
    return [RunPair(*key, a[key], b[key]) for key in sorted(set(a) & set(b))]


@dataclass
class DroppedTopic:
    """A topic that one method of the pair simulated but that cannot be judged: the other side (or both) has
    no finished run. Shown next to win/tie/lose so a failed simulation never silently shrinks the pair set."""

    user_id: str
    sample_id: str
    topic_key: str
    method_a: str
    method_b: str
    status_a: str  # the newest run's status ("finished", "failed", "running", "stopped") or "no run"
    status_b: str
    error: str = ""  # the failed run's error, when there is one

    @property
    def reason(self) -> str:
        parts = [f"{m}: {st}" for m, st in ((self.method_a, self.status_a), (self.method_b, self.status_b))
                 if st != "finished"]
        return "; ".join(parts) + (f" ({self.error})" if self.error else "")


def dropped_topics(sims: SimStore, dataset: str, method_a: str, method_b: str,
                   users: Iterable[str] | None = None) -> list[DroppedTopic]:
    """Topics where either method has a run but not both have a finished one (the newest run of each counts)."""
    wanted = set(users) if users else None

    def newest(method: str) -> dict[tuple[str, str, str], dict]:
        found: dict[tuple[str, str, str], dict] = {}
        finished: set[tuple[str, str, str]] = set()
        for r in sims.list(dataset=dataset, method=method):  # newest first
            key = (r["user_id"], r["sample_id"], r["topic_key"])
            if wanted is not None and r["user_id"] not in wanted:
                continue
            found.setdefault(key, r)
            if r["status"] == "finished":
                finished.add(key)
        for key in finished:  # pair_runs judges the newest *finished* run, whatever came after it
            found[key] = {**found[key], "status": "finished"}
        return found

    a, b = newest(method_a), newest(method_b)
    out = []
    for key in sorted(set(a) | set(b)):
        ra, rb = a.get(key), b.get(key)
        sa, sb = (r["status"] if r else "no run" for r in (ra, rb))
        if sa == sb == "finished":
            continue
        error = ""
        for r in (ra, rb):
            if r and r["status"] == "failed":
                error = error or (sims.load(r["run_id"]).error or "")
        out.append(DroppedTopic(*key, method_a, method_b, sa, sb, error))
    return out


def topic_context(dataset: Dataset, user_id: str, sample_id: str, topic_key: str) -> TopicContext:
    """The dataset's view of one topic (raises KeyError when the dataset lacks it)."""
    user = dataset.users[user_id]
    session = user.session(sample_id)
    topic = next((t for t in session.topics if t.key == topic_key), None) if session else None
    if session is None or topic is None:
        raise KeyError(f"user {user_id} has no {sample_id}/{topic_key}")
    return TopicContext(user=user, session=session, topic=topic)


def judge_runs(llm: LLMClient, dataset: Dataset, sims: SimStore, store: EvalStore, pairs: list[RunPair],
               aspects: Iterable[Aspect], *, k: int = 3, threshold: float = 0.0, temperature: float | None = None,
               seed: int | None = None, prompts: str | None = None,
               progress: Progress | None = None) -> list[Judgment]:
    """Judge every pair on every aspect; a judgment already stored for the same key is loaded, not redone."""
    judge_model = llm.config.role("judge").model
    jobs = [(p, a) for p in pairs for a in aspects]
    out: list[Judgment] = []
    for done, (pair, aspect) in enumerate(jobs, 1):
        key = planned_key(pair.run_a, pair.run_b, aspect, k, judge_model, dataset.users[pair.user_id].language,
                          temperature=temperature, seed=seed, prompts=prompts)
        if store.has_judgment(key):
            out.append(store.load_judgment(key))
            what = "stored"
        else:
            ctx = topic_context(dataset, pair.user_id, pair.sample_id, pair.topic_key)
            j = judge_pair(llm.for_run(key), ctx, sims.load(pair.run_a), sims.load(pair.run_b), aspect, k=k,
                           threshold=threshold, temperature=temperature, seed=seed,
                           prompts=prompts)  # the judge's calls, accounted to the judgment
            store.save_judgment(j)
            out.append(j)
            what = j.decision
        if progress:
            progress(done, len(jobs), f"{pair.user_id} {pair.sample_id} {pair.topic_key} {aspect}: {what}")
    return out


def query_topics(dataset: Dataset, users: Iterable[str] | None) -> list[tuple[str, str, str]]:
    """(user, sample, topic) of every query-session topic of the selected users."""
    ids = list(users) if users else list(dataset.users)
    return [(u, s.sample_id, t.key) for u in ids for s in dataset.users[u].query for t in s.topics]


def bench_tasks(llm: LLMClient, dataset: Dataset, methods: list[str], store: EvalStore, open_builder: BuilderOpener,
                users: Iterable[str] | None = None, tasks: tuple[Task, ...] = TASKS,
                progress: Progress | None = None) -> list[TaskResult]:
    """Every task on every query topic for every method; stored results are reused (resume).

    ``open_builder`` opens each (user, method)'s memory (the workspace's, so the tasks use the same build
    as the Memory page and Simulate)."""
    key = dataset_key(dataset.root)
    topics = query_topics(dataset, users)
    results: list[TaskResult] = []
    done, total = 0, len(topics) * len(methods)
    for method in methods:
        builders: dict[str, MemoryBuilder] = {}
        for user_id, sample_id, topic_key in topics:
            if method != "vanilla" and user_id not in builders:
                builders[user_id] = open_builder(dataset, user_id, method, llm=llm)
            ctx = topic_context(dataset, user_id, sample_id, topic_key)
            runner = TopicTasks(llm, ctx, method, builders.get(user_id), key)
            new = runner.run(tasks, known=lambda _t, k: store.get_result(k))
            for r in new:
                store.save_result(r)
            results += new
            done += 1
            if progress:
                progress(done, total, f"{method} {user_id} {sample_id} {topic_key}")
    return results
