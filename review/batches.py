"""Task types, candidate items, seeded sampling and round-robin assignment with overlap.

A batch records everything needed to reproduce it: the seed, the candidate keys it sampled from
(in the order sampled), the overlap and the annotators in rotation order. Sampling draws from the
candidates sorted by key with ``random.Random(seed)``, so the same seed gives the same items.
For pairwise items the A/B order is seeded per item (from the batch seed and the item key, so an item
keeps its order whatever else is sampled) and stored with the item; annotators see "Response A/B" only.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from palset.dataset import Dataset


@dataclass(frozen=True)
class Question:
    key: str
    label: str
    options: tuple[tuple[str, str], ...] = ()  # (value, label); empty: free text
    required: bool = True

    @property
    def free_text(self) -> bool:
        return not self.options


SCALE = (("1", "1 · poor"), ("2", "2 · partly"), ("3", "3 · good"))
AB = (("A", "A better"), ("tie", "Tie"), ("B", "B better"))
YES_NO_NA = (("yes", "Yes"), ("no", "No"), ("na", "Does not apply"))


@dataclass(frozen=True)
class TaskType:
    key: str
    label: str
    questions: tuple[Question, ...]
    guidelines: str = ""

    @property
    def required(self) -> list[Question]:
        return [q for q in self.questions if q.required]


TASKS: dict[str, TaskType] = {
    "quality": TaskType(
        "quality", "Data quality of a session",
        (Question("logs", "The logs reflect the situation", SCALE),
         Question("dialogue", "The dialogue fits the user's profile and preferences", SCALE),
         Question("comment", "Comment", required=False)),
        "Read the user's profile, preferences and situation, then the session's logs and dialogue.\n\n"
        "- **Logs (1–3)**: 3 when the logs plausibly reflect the situation, 1 when they contradict it or are unrelated.\n"
        "- **Dialogue (1–3)**: 3 when the user speaks in line with profile and preferences, 1 when not.\n\n"
        "Keys: **1 2 3** answer the highlighted question, **n / p** next / previous item, **u** undo."),
    "pairwise": TaskType(
        "pairwise", "Pairwise: two simulated dialogues",
        (Question("requirement", "Which assistant meets the user's requirement better?", AB),
         Question("preference", "Which assistant fits the user's preference better?", AB)),
        "Two dialogues on the same topic with different assistants, in random order.\n\n"
        "- **Requirement**: which assistant addresses what the user needs.\n"
        "- **Preference**: which assistant's suggestions fit what the user likes and dislikes.\n\n"
        "Keys: **1** A better, **2** tie, **3** B better, **n / p** next / previous, **u** undo."),
    "memory": TaskType(
        "memory", "Memory audit",
        (Question("verdict", "Is this memory item right?",
                  (("correct", "Correct"), ("incorrect", "Incorrect"), ("unsupported", "Unsupported"))),
         Question("correction", "Correction (optional)", required=False)),
        "Compare the memory item with its sources.\n\n"
        "- **Correct**: the sources support it. **Incorrect**: the sources contradict it. "
        "**Unsupported**: nothing in the sources says it.\n\n"
        "Keys: **1 2 3** verdict, **n / p** next / previous, **u** undo."),
}


def simturn_task(checks: tuple[Question, ...], guidelines: list[str]) -> TaskType:
    """The simulated-turn task ("check the checker"): one question per simulator-fidelity check and a comment. The
    checks and their guideline lines come from the checks' registry (``evaluation.simfidelity.registry``, which sits
    above review and registers the task with :func:`register_task`), so the batch asks exactly what is checked."""
    return TaskType(
        "simturn", "Simulated user turns (check the checker)",
        (*checks, Question("comment", "Comment", required=False)),
        "One turn a **simulated user** wrote in a dialogue with an assistant. You see who the user is, what the dataset "
        "says they need and like, the dialogue up to the turn, and the act the turn was scheduled to perform.\n\n"
        + "".join(f"- {line}\n" for line in guidelines)
        + "\nKeys: **1 2 3** answer the highlighted question, **n / p** next / previous, **u** undo.")


def register_task(task: TaskType) -> None:
    """Add (or replace) a task type whose questions a higher layer defines (the ``simturn`` task)."""
    TASKS[task.key] = task


@dataclass
class BatchPlan:
    title: str
    task: str
    dataset: str
    seed: int
    overlap: int
    annotators: list[str]
    guidelines: str
    items: list[tuple[str, dict]]  # (item key, payload), in item order
    data: dict = field(default_factory=dict)


def sample(candidates: list[tuple[str, dict]], n: int, seed: int) -> tuple[list[tuple[str, dict]], random.Random]:
    """``n`` candidates (all when fewer) drawn with ``random.Random(seed)`` from the candidates sorted by key."""
    pool = sorted(candidates, key=lambda kv: kv[0])
    rng = random.Random(seed)
    return rng.sample(pool, min(max(n, 0), len(pool))), rng


def assign(n_items: int, annotators: list[str], overlap: int) -> list[list[str]]:
    """Round-robin: item i goes to ``overlap`` consecutive annotators of the rotation, starting after item i-1's."""
    if not annotators:
        raise ValueError("choose at least one annotator")
    if len(set(annotators)) != len(annotators):
        raise ValueError("annotators must be distinct")
    if not 1 <= overlap <= len(annotators):
        raise ValueError(f"overlap must be between 1 and the number of annotators ({len(annotators)})")
    m = len(annotators)
    return [[annotators[(i * overlap + j) % m] for j in range(overlap)] for i in range(n_items)]


def plan_batch(title: str, task: str, dataset: str, candidates: list[tuple[str, dict]], n: int, seed: int,
               overlap: int, annotators: list[str], guidelines: str | None = None) -> BatchPlan:
    if task not in TASKS:
        raise ValueError(f"unknown task type {task!r}")
    if not candidates:
        raise ValueError("no candidate items for this task")
    assign(1, annotators, overlap)  # validates
    chosen, _ = sample(candidates, n, seed)
    items = []
    for key, payload in chosen:
        payload = dict(payload)
        if task == "pairwise":
            payload["swap"] = item_swap(seed, key)  # True: method_b is shown as A
        items.append((key, payload))
    return BatchPlan(title=title.strip() or TASKS[task].label, task=task, dataset=dataset, seed=seed, overlap=overlap,
                     annotators=list(annotators), guidelines=TASKS[task].guidelines if guidelines is None else guidelines,
                     items=items, data={"n_requested": n, "n_candidates": len(candidates)})


# ---------------------------------------------------------------------------------------------- candidates


def quality_candidates(dataset: Dataset) -> list[tuple[str, dict]]:
    """Every session with logs or turns: (``uid/sample_id``, payload)."""
    out = []
    for uid, user in dataset.users.items():
        for s in user.sessions:
            if s.logs or s.turns:
                out.append((f"{uid}/{s.sample_id}", {"user_id": uid, "sample_id": s.sample_id}))
    return out


def pairwise_candidates(runs: list[dict], method_a: str, method_b: str) -> list[tuple[str, dict]]:
    """Pairs of finished runs of the two methods on the same user, sample and topic (newest run of each)."""
    if method_a == method_b:
        raise ValueError("choose two different methods")
    best: dict[tuple[str, str, str, str], dict] = {}
    for r in runs:
        if r.get("status") != "finished" or r["method"] not in (method_a, method_b):
            continue
        key = (r["user_id"], r["sample_id"], r["topic_key"], r["method"])
        if key not in best or r["updated_at"] > best[key]["updated_at"]:
            best[key] = r
    out = []
    for (uid, sample_id, topic, method), run in best.items():
        if method != method_a or (uid, sample_id, topic, method_b) not in best:
            continue
        other = best[(uid, sample_id, topic, method_b)]
        out.append((f"{uid}/{sample_id}/{topic}", {
            "user_id": uid, "sample_id": sample_id, "topic_key": topic, "method_a": method_a, "method_b": method_b,
            "run_a": run["run_id"], "run_b": other["run_id"]}))
    return out


def memory_candidates(build_id: str, items: list, user_id: str = "") -> list[tuple[str, dict]]:
    """Memory items (``memory.types.MemoryItem``) of one build, each with its provenance."""
    return [(f"{build_id}/{it.id}", {"build_id": build_id, "user_id": user_id, "item_id": it.id, "layer": it.layer,
                                      "text": it.text, "session_id": it.session_id, "provenance": list(it.provenance)})
            for it in items]


def simturn_candidates(turns: list[dict]) -> list[tuple[str, dict]]:
    """Simulated user turns of stored runs (each ``{run_id, user_id, sample_id, topic_key, turn_no, act}``), keyed by
    :func:`simturn_key`. The payload names no simulator, model or method: annotators answer blinded to who wrote the
    turn and to the automatic checks (which the agreement reads from the run store, never from the item)."""
    keep = ("run_id", "user_id", "sample_id", "topic_key", "turn_no", "act")
    return [(simturn_key(t), {k: t[k] for k in keep}) for t in turns]


def simturn_key(turn: dict) -> str:
    """``user/sample/topic/<run digest>/turn``: unique per run and turn, and free of the run id itself (which a
    bundle re-keys where the dataset lives elsewhere; an item key is never rewritten)."""
    digest = hashlib.sha1(str(turn["run_id"]).encode()).hexdigest()[:8]
    return f"{turn['user_id']}/{turn['sample_id']}/{turn['topic_key']}/{digest}/{turn['turn_no']}"


def item_swap(seed: int, key: str) -> bool:
    """The per-item seeded A/B order of a pairwise item: True shows method 2 as Response A."""
    return hashlib.sha256(f"{seed}:{key}".encode()).digest()[0] & 1 == 1


def shown_order(payload: dict) -> tuple[str, str]:
    """(method shown as A, method shown as B) of a pairwise item."""
    a, b = payload["method_a"], payload["method_b"]
    return (b, a) if payload.get("swap") else (a, b)


def winner(payload: dict, value: str) -> str:
    """A pairwise answer as the method it favours, or ``tie``."""
    if value == "tie":
        return "tie"
    shown_a, shown_b = shown_order(payload)
    return shown_a if value == "A" else shown_b


# ---------------------------------------------------------------------------------------------- stored records


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BatchRecord(_Record):
    """A ``review_batches`` row as :meth:`review.store.ReviewStore.create_batch` writes it (a bundle's rows are
    checked against it)."""

    batch_id: str = Field(pattern=r"^b-[0-9a-f]{8}$")
    title: str = Field(max_length=500)
    task: Literal["quality", "pairwise", "memory", "simturn"]
    dataset: str
    seed: int
    overlap: int = Field(ge=1)
    annotators: list[str] = Field(min_length=1)
    guidelines: str = Field(max_length=50_000)
    data: dict[str, Any]
    created_by: str
    created_at: float


class QualityPayload(_Record):
    user_id: str
    sample_id: str


class PairwisePayload(_Record):
    user_id: str
    sample_id: str
    topic_key: str
    method_a: str
    method_b: str
    run_a: str
    run_b: str
    swap: bool = False


class MemoryPayload(_Record):
    build_id: str
    user_id: str = ""
    item_id: str
    layer: str
    text: str
    session_id: str
    provenance: list[str]


class SimturnPayload(_Record):
    run_id: str
    user_id: str
    sample_id: str
    topic_key: str
    turn_no: int = Field(ge=1)
    act: str


PAYLOADS: dict[str, type[BaseModel]] = {"quality": QualityPayload, "pairwise": PairwisePayload,
                                        "memory": MemoryPayload, "simturn": SimturnPayload}
assert set(TASKS) <= set(PAYLOADS)  # simturn's task is registered from above (simturn_task)
