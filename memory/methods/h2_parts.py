"""H²Memory's building blocks: bounded output schemas for every LLM step, and the pure graph and
clustering helpers (windows, edge cleaning, connected components, constrained k-means, span tiling)."""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, create_model

from backends.llm.dynamic import field, list_of, one_of
from memory.privacy import redact_text
from memory.types import MemoryItem
from palset.dataset import Session

AspectName = Literal["work", "health", "family", "leisure"]
WINDOW = 10
# A session of at most this many logs is sent whole at the start of every log-graph window and situation call: one
# prefix per session, which the server's prompt cache serves after the first call (PAL-Set sessions hold 15–25 logs,
# about 1,100 tokens in English). A longer session sends each call its own logs, so no prompt outgrows the window.
SHARED_LOGS = 30



# ---------------------------------------------------------------- bounded output schemas


class SituationOut(BaseModel):
    # a condensed description (at most 3 sentences), never a copy of the logs; an empty one would be stored empty
    situation: str = Field(min_length=1, max_length=400)
    situation_aspects: list[AspectName] = Field(min_length=1, max_length=4)


class BackgroundContent(BaseModel):
    work: str | None = Field(None, max_length=200)  # one short sentence per aspect
    health: str | None = Field(None, max_length=200)
    family: str | None = Field(None, max_length=200)
    leisure: str | None = Field(None, max_length=200)


class BackgroundOut(BaseModel):
    updating_aspects: list[AspectName] = Field(max_length=4)
    updating_content: BackgroundContent


class SolutionOut(BaseModel):
    solution: str = Field(max_length=160)  # a one-sentence summary
    user_feedback: str = Field(max_length=100)  # the user's attitude in a few words
    feedback_type: Literal["pos", "neg", "others"]


class TopicOut(BaseModel):
    turn_span: list[int] = Field(min_length=2, max_length=2)
    requirement: str = Field(min_length=1, max_length=200)
    solution_list: list[SolutionOut] = Field(max_length=3)  # the fixed schedule proposes two; three leaves room
    preference: str = Field(max_length=200)


class OutlineOut(BaseModel):
    topics: list[TopicOut] = Field(min_length=1, max_length=3)


class RefinedOut(BaseModel):
    requirement: str = Field(min_length=1, max_length=300)


class GeneralRequirementOut(BaseModel):
    general_requirement: str = Field(max_length=120)


class PrincipleOut(BaseModel):
    principle: str = Field(max_length=300)


class RequirementAdjustOut(BaseModel):
    """The reference's reply: ``{"adjust": "No"}`` or ``{"adjust": "Yes", "general_requirement": …}``."""

    adjust: Literal["Yes", "No"]
    general_requirement: str | None = Field(None, max_length=120)


class PrincipleAdjustOut(BaseModel):
    """The reference's reply: ``{"adjust": "No"}`` or ``{"adjust": "Yes", "principle": …}``."""

    adjust: Literal["Yes", "No"]
    principle: str | None = Field(None, max_length=300)


def log_graph_model(targets: list[str], allowed: list[str]) -> type[BaseModel]:
    """A schema whose ids are enums of this window's logs, so even a tiny model can only name real logs. Made once
    per (targets, allowed): windows repeat across sessions and users, and building a model and its JSON schema
    takes pydantic milliseconds."""
    return _log_graph_model(tuple(targets), tuple(allowed))


@functools.lru_cache(maxsize=512)
def _log_graph_model(targets: tuple[str, ...], allowed: tuple[str, ...]) -> type[BaseModel]:
    earlier_id = one_of(list(allowed)) if allowed else str
    relation = create_model(
        "LogRelation",
        log=field(one_of(list(targets))),
        caused_by=field(list_of(earlier_id), Field(default_factory=list, max_length=5)),
        follows=field(list_of(earlier_id), Field(default_factory=list, max_length=5)),
    )
    return create_model("LogGraphOut", relations=field(list_of(relation), Field(max_length=len(targets))))


# ---------------------------------------------------------------- pure helpers (unit-tested)


def windows(n_logs: int, size: int = WINDOW) -> list[tuple[list[int], list[int]]]:
    """(analysed log indices, context log indices) per sliding window of ``size`` with ``size`` logs of context."""
    return [(list(range(start, min(start + size, n_logs))), list(range(max(0, start - size), start)))
            for start in range(0, n_logs, size)]


def log_entries(session: Session) -> dict[str, dict[str, str]]:
    """The session's logs as the logs-stage prompts show them: ``{log_id: {timestamp, content}}``, redacted."""
    return {f"log_{j}": {"timestamp": f"{lg.timestamp:%Y-%m-%d %H:%M}", "content": redact_text(lg.content)}
            for j, lg in enumerate(session.logs)}


def shared_logs(entries: dict[str, dict[str, str]], own: Sequence[int], limit: int = SHARED_LOGS) -> str:
    """What a logs-stage call starts with (``$session_logs``): every log of the session when it has at most
    ``limit`` logs — word for word the same for every window and situation of the session, so the server's prompt
    cache serves it — else the call's ``own`` logs (in session order)."""
    ids = list(entries) if len(entries) <= limit else [f"log_{j}" for j in sorted(own)]
    return json.dumps({i: entries[i] for i in ids}, ensure_ascii=False)


def group_lines(entries: dict[str, dict[str, str]], edges: list[tuple[int, int, str]], group: list[int]) -> str:
    """A situation's logs as its prompt restates them: one line each, with its caused_by list, or its follows list
    when it has no cause (spec §3.1)."""
    lines = []
    for j in group:
        caused = [a for a, b, kind in edges if b == j and kind == "caused_by"]
        follows = [a for a, b, kind in edges if b == j and kind == "follows"]
        rel = ("caused_by", caused) if caused else ("follows", follows) if follows else None
        suffix = f" ({rel[0]}: {', '.join(f'log_{a}' for a in rel[1])})" if rel else ""
        lines.append(f"log_{j} [{entries[f'log_{j}']['timestamp']}] {entries[f'log_{j}']['content']}{suffix}")
    return "\n".join(lines)


def clean_edges(relations: list[dict[str, Any]], window: list[int], context: list[int]) -> list[tuple[int, int, str]]:
    """Keep edges B←A with A earlier than B and inside the window; caused_by wins over follows."""
    allowed = set(window) | set(context)
    out: dict[tuple[int, int], str] = {}
    for rel in relations:
        b = int(str(rel["log"]).removeprefix("log_"))
        if b not in window:
            continue
        for kind in ("caused_by", "follows"):
            for a_id in rel.get(kind, []):
                a = int(str(a_id).removeprefix("log_"))
                if a in allowed and a < b and (a, b) not in out:
                    out[(a, b)] = kind
    return [(a, b, kind) for (a, b), kind in sorted(out.items())]


def components(n_logs: int, edges: list[tuple[int, int, str]]) -> list[list[int]]:
    """Connected components (singletons included) of the undirected log graph, each sorted, in order of first log."""
    parent = list(range(n_logs))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, _ in edges:
        parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for i in range(n_logs):
        groups.setdefault(find(i), []).append(i)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])


def join_small_groups(groups: list[list[int]], times: Sequence[float], min_logs: int) -> list[list[int]]:
    """Groups of fewer than ``min_logs`` logs joined to the group nearest in time, in order of first log.

    A small model's Log Graph links few logs (most components are single logs; see FIDELITY.md), so a situation
    would be one log. A log the graph leaves (nearly) alone most likely belongs to what the user was living through
    at that time: the smallest group (the earliest on ties) joins the group with the log closest to it in time
    (the earlier group on ties), until every group has ``min_logs`` logs or one group is left. ``min_logs`` ≤ 1
    keeps the components as they are (Mem-PAL's own rule)."""
    out = [sorted(g) for g in groups]
    while len(out) > 1 and min_logs > 1:
        small = [i for i, g in enumerate(out) if len(g) < min_logs]
        if not small:
            break
        i = min(small, key=lambda k: (len(out[k]), out[k][0]))
        gaps = {k: min(abs(times[a] - times[b]) for a in out[i] for b in g) for k, g in enumerate(out) if k != i}
        j = min(gaps, key=lambda k: (gaps[k], out[k][0]))
        out[j] = sorted(out[j] + out[i])
        del out[i]
    return sorted(out, key=lambda g: g[0])


def situation_groups(n_logs: int, edges: list[tuple[int, int, str]], times: Sequence[float],
                     min_logs: int) -> tuple[list[list[int]], set[int]]:
    """(the session's situations as groups of logs, the logs that joined theirs by time rather than by an edge):
    the Log Graph's connected components, the small ones joined by :func:`join_small_groups`."""
    found = components(n_logs, edges)
    joined = {j for g in found if len(g) < min_logs for j in g} if len(found) > 1 else set()
    return join_small_groups(found, times, min_logs), joined


def constrained_kmeans(vectors: np.ndarray, k: int = 8, min_size: int = 2, attempts: int = 100,
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """k-means redone until every cluster has ≥ ``min_size`` members (Mem-PAL §3.4); k shrinks when data is scarce.

    The fits skip scikit-learn's checks of its own parameters and of finite input (the vectors come from an embedder
    and are checked once here): a fit of a user's few dozen topics is mostly those checks, and a build may fit a
    hundred times. They run on one OpenMP thread: scikit-learn splits a fit into chunks of 256 vectors, so a user's
    topics are one chunk that one thread computes anyway, while a second thread only spun waiting for work (as much
    CPU again as the fits themselves). Up to 256 vectors the clusters are the same either way; beyond, one thread
    adds the chunks up in a fixed order, so a fit is reproducible."""
    import sklearn
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    n = len(vectors)
    if not np.isfinite(vectors).all():
        raise ValueError("constrained_kmeans: the vectors hold NaN or infinite values")
    distinct = len(np.unique(np.round(vectors, 6), axis=0))
    k = max(1, min(k, n // min_size, distinct))
    rng = random.Random(seed)
    with sklearn.config_context(assume_finite=True, skip_parameter_validation=True), \
            threadpool_limits(limits=1, user_api="openmp"):
        for k_try in range(k, 0, -1):  # if k cannot satisfy the size rule, fewer clusters can
            for _ in range(attempts if k_try == k else 20):
                km = KMeans(n_clusters=k_try, n_init=1, random_state=rng.randrange(2**31)).fit(vectors)
                labels = _compact(km.labels_)
                sizes = np.bincount(labels)
                if sizes.min() >= min_size:
                    centers = np.vstack([vectors[labels == c].mean(axis=0) for c in range(len(sizes))])
                    return labels, centers
    labels = np.zeros(n, dtype=int)
    return labels, vectors.mean(axis=0, keepdims=True)


def _compact(labels: np.ndarray) -> np.ndarray:
    """Renumber cluster labels 0..m-1 (k-means may leave a cluster empty)."""
    _, inverse = np.unique(labels, return_inverse=True)
    return inverse


def tile_spans(spans: list[list[int]], n_turns: int) -> list[tuple[int, int]]:
    """Make topic turn spans contiguous and cover turns 1..n (a tolerable error in the spec)."""
    starts = sorted({max(1, min(n_turns, s[0])) for s in spans})
    starts[0] = 1
    return [(start, (starts[i + 1] - 1) if i + 1 < len(starts) else n_turns) for i, start in enumerate(starts)]


def bullet(text: str) -> str:
    """An item as a bullet of the assistant's note; an item that is already a list (the gold memory holds a query
    session's situation as its logs, each "- [time] …") keeps its own bullets, not "- - [time] …"."""
    lines = text.splitlines()
    return text if lines and all(line.startswith("- ") for line in lines) else f"- {text}"


def topic_with_feedback(item: MemoryItem) -> str:
    """A topic outline as retrieval shows it: the requirement, then the solutions the user accepted and rejected."""
    groups: dict[str, list[str]] = {"pos": [], "neg": [], "others": []}
    for s in item.meta.get("solutions", []):
        groups.get(s.get("feedback_type", "others"), groups["others"]).append(
            f"  - {s.get('solution', '')} (user: {s.get('user_feedback', '')})")
    lines = [f"- requirement: {item.text}"]
    for kind, title in (("pos", "accepted"), ("neg", "rejected"), ("others", "other")):
        if groups[kind]:
            lines.append(f"  {title}:")
            lines += groups[kind]
    return "\n".join(lines)


def background_text(item: MemoryItem | None) -> str:
    """An aspect's current background text (empty when the aspect has none yet)."""
    return item.text if item is not None else ""


def principle_item(uid: str, c: int, general: str, principle: str, members: list[MemoryItem],
                    centroid: np.ndarray, count: int, at: MemoryItem) -> MemoryItem:
    """A new principle item: cluster ``c``'s general requirement and principle, its members and centroid."""
    return MemoryItem(
        id=f"{uid}_cluster{c}", layer="principle", text=f"{general}: {principle}".strip(": "),
        session_id=at.session_id, session_index=at.session_index,
        provenance=[f"item:{m.id}" for m in members][:20], importance=float(count),
        meta={"general_requirement": general, "principle": principle, "members": [m.id for m in members],
              "centroid": [round(float(x), 6) for x in centroid], "count": count})
