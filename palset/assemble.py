"""Assemble one user's synthesis outputs into the PAL-Set release layout (spec §2.13).

A :class:`UserBundle` holds everything the synthesis steps produce for one user, situation by
situation (the hand-written demo users are written in this form too). Assembly walks the
situations in time order, numbers the kept ones ``{uid}_sample{i}`` through history then query,
gives each session every log after the previous dialogue up to its own dialogue time, builds its
topics from the three framework parts, and writes/merges the release files.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from palset.atomic import recover, write_many
from palset.files import LAYOUT, read_json
from palset.models import FeedbackReason, ImplicitNeed


class BundleModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class BundleLog(BundleModel):
    timestamp: str
    type: str | None = None
    content: str


class BundleUtterance(BundleModel):
    action: str
    content: str


class BundleTurn(BundleModel):
    user: BundleUtterance
    assistant: BundleUtterance


class BundleTopic(BundleModel):
    requirement_type: str
    user_query: str
    implicit_needs: list[ImplicitNeed]
    requirement: str
    candidate_solutions: list[str]
    analysis: str = ""
    pos_list: list[FeedbackReason]
    neg_list: list[FeedbackReason]


class BundleSituation(BundleModel):
    time_span: str  # "YYYY-MM-DD ~ YYYY-MM-DD"
    start_hour: int = Field(ge=0, le=23)
    end_hour: int = Field(ge=0, le=23)
    requirement_ids: list[str]
    situation: str
    kept: Literal["history", "query"] | None = None
    logs: list[BundleLog] = Field(default_factory=list)
    topics: list[BundleTopic] = Field(default_factory=list)
    dialogue: list[BundleTurn] = Field(default_factory=list)

    @property
    def start(self) -> datetime:
        day = self.time_span.split("~")[0].strip()
        return datetime.strptime(day, "%Y-%m-%d") + timedelta(hours=self.start_hour)

    @property
    def end(self) -> datetime:
        day = self.time_span.split("~")[1].strip()
        return datetime.strptime(day, "%Y-%m-%d") + timedelta(hours=self.end_hour)


class UserBundle(BundleModel):
    """All synthesis outputs of one user, situation by situation."""

    uid: str
    lang: Literal["en", "zh"]
    profile: dict
    requirement_types: dict[str, dict[str, str]]
    preferences: dict[str, dict[str, dict[str, str]]]
    timeline: dict[str, str]
    situations: list[BundleSituation]


def _stamp(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%d %H:%M:%S")


def _topic_record(topic: BundleTopic) -> dict:
    pos = [p.solution for p in topic.pos_list]
    neg = [n.solution for n in topic.neg_list]
    label = {**{s: "pos" for s in pos}, **{s: "neg" for s in neg}}
    return {
        "user_query": topic.user_query,
        "implicit_needs": [n.need for n in topic.implicit_needs],
        "requirement": topic.requirement,
        "solution": {"pos": pos, "neg": neg},
        "candidate_solutions": _labelled(topic.candidate_solutions, label),
    }


def _labelled(candidates: list[str], label: dict[str, str]) -> list[dict[str, str]]:
    """Each candidate with its pos/neg/neu label; a repeated candidate text carries its label only once
    (a small generator model may repeat a candidate, and a topic has exactly 2 pos and 2 neg)."""
    out, labelled = [], set()
    for c in candidates:
        feedback = label.get(c, "neu") if c not in labelled else "neu"
        labelled.add(c)
        out.append({"solution": c, "feedback": feedback})
    return out


def assemble_user(bundle: UserBundle) -> dict[str, object]:
    """Per logical file (see :data:`palset.files.LAYOUT`), this user's entry."""
    logs = sorted(
        ((datetime.strptime(lg.timestamp, "%Y-%m-%d %H:%M"), lg) for s in bundle.situations for lg in s.logs),
        key=lambda pair: pair[0],
    )
    samples: dict[str, list[dict]] = {"history": [], "query": []}
    situations, framework, candidates, sol_pref = {}, {}, {}, {}
    previous_end: datetime | None = None
    index = 0
    for sit in bundle.situations:
        end_date = sit.end.date().isoformat()
        situations[end_date] = {
            "start_timestamp": _stamp(sit.start),
            "end_timestamp": _stamp(sit.end),
            "requirement_ids": sit.requirement_ids,
            "situation": sit.situation,
        }
        if sit.kept is None:
            continue
        keys = [f"topic-{k}" for k in range(1, len(sit.topics) + 1)]
        framework[end_date] = {
            key: {
                "requirement_type": t.requirement_type,
                "user_query": t.user_query,
                "implicit_needs": [n.model_dump() for n in t.implicit_needs],
                "requirement": t.requirement,
            }
            for key, t in zip(keys, sit.topics)
        }
        candidates[end_date] = {key: t.candidate_solutions for key, t in zip(keys, sit.topics)}
        sol_pref[end_date] = {
            key: {
                "analysis": t.analysis,
                "pos_list": [p.model_dump() for p in t.pos_list],
                "neg_list": [n.model_dump() for n in t.neg_list],
            }
            for key, t in zip(keys, sit.topics)
        }
        session_logs = [
            lg.model_dump(exclude_none=True)
            for ts, lg in logs
            if (previous_end is None or ts > previous_end) and ts <= sit.end
        ]
        samples[sit.kept].append(
            {
                "sample_id": f"{bundle.uid}_sample{index}",
                "dialogue_timestamp": _stamp(sit.end),
                "logs": session_logs,
                "dialogue": {f"turn_{i}": turn.model_dump() for i, turn in enumerate(sit.dialogue, start=1)},
                "topics": {key: _topic_record(t) for key, t in zip(keys, sit.topics)},
            }
        )
        previous_end = sit.end
        index += 1
    preferences = {
        aspect: {
            rid: {"requirement": bundle.requirement_types.get(aspect, {}).get(rid, ""), "preference": pref}
            for rid, pref in per.items()
        }
        for aspect, per in bundle.preferences.items()
    }
    return {
        "profiles": bundle.profile,
        "requirement_types": bundle.requirement_types,
        "preferences": preferences,
        "samples": samples,
        "situations": situations,
        "timeline": bundle.timeline,
        "requirement_framework": framework,
        "candidate_solutions": candidates,
        "solution_preference": sol_pref,
    }


def write_release(root: str | Path, bundles: list[UserBundle], suffix: str = "") -> list[Path]:
    """Add (or replace) these users in the release files under ``root``; other users are kept.

    The files are replaced together, all or nothing (:func:`palset.atomic.write_many`: a crash never leaves a user
    in some files and not in others), each with its previous version kept as ``<name>.prev``; an existing file that
    cannot be read is an error naming it, and nothing is written over it.
    """
    root = Path(root)
    recover(root)  # a write a crash interrupted is finished before this one reads the files
    per_file: dict[str, dict[str, object]] = {}
    for bundle in bundles:
        for name, entry in assemble_user(bundle).items():
            per_file.setdefault(name, {})[bundle.uid] = entry
    texts: dict[Path, str] = {}
    for name, entries in per_file.items():
        path = root / f"{LAYOUT[name]}{suffix}.json"
        current = _existing(path, root)
        current.update(entries)
        current = dict(sorted(current.items()))
        texts[path] = json.dumps(current, ensure_ascii=False, indent=2) + "\n"
    return write_many(root, texts)


def _existing(path: Path, root: Path) -> dict[str, object]:
    """The users already in a release file (empty when it does not exist yet)."""
    if not path.is_file():
        return {}
    data, problems = read_json(path, str(path.relative_to(root)))
    if problems or not isinstance(data, dict):
        why = "; ".join(p.message for p in problems) or "expected an object keyed by user id"
        raise ValueError(f"{path}: cannot add users to it: {why}")
    return data
