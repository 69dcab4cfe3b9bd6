"""Load a dataset folder in the PAL-Set release layout into a :class:`~palset.dataset.Dataset`.

Loading never raises on bad content. Each file is validated user by user (and ``input.json``
session by session), so one broken value costs only the record that holds it; every problem is
kept on ``Dataset.problems`` with its file and JSON path. Cross-file checks live in
:mod:`palset.checks`.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from palset.atomic import JOURNAL, inside_folder
from palset.checks import check_templates, check_user_files, check_user_sessions, check_users_in_every_file
from palset.dataset import Dataset, Session, SessionCounts, SessionTopic, User
from palset.files import LAYOUT, locate, read_json
from palset.logtypes import infer_log_type
from palset.models import (
    FrameworkTopic,
    Log,
    Preferences,
    Profile,
    RequirementTypes,
    Sample,
    Situation,
    SolutionPreference,
    TemplateTurn,
    sample_index,
)
from palset.problems import Problem, problems_from_validation

_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    "profiles": TypeAdapter(Profile),
    "requirement_types": TypeAdapter(RequirementTypes),
    "preferences": TypeAdapter(Preferences),
    "situations": TypeAdapter(dict[str, Situation]),
    "timeline": TypeAdapter(dict[str, str]),
    "requirement_framework": TypeAdapter(dict[str, dict[str, FrameworkTopic]]),
    "candidate_solutions": TypeAdapter(dict[str, dict[str, list[str]]]),
    "solution_preference": TypeAdapter(dict[str, dict[str, SolutionPreference]]),
}
_SAMPLE = TypeAdapter(Sample)
_TEMPLATE = TypeAdapter(dict[str, TemplateTurn])
_CJK = re.compile(r"[\u4e00-\u9fff]")
_MONTH_ZH = re.compile(r"^(\d{4})年(\d{1,2})月$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_DATE_KEY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def load_dataset(root: str | Path, lazy: bool = False) -> Dataset:
    """Read, validate and join every release file under ``root``.

    With ``lazy=True`` (the app), each user's sessions are validated and built when first
    accessed, and their problems are added to ``Dataset.problems`` then.
    """
    root = Path(root)
    problems: list[Problem] = []
    paths = locate(root) if root.is_dir() else dict.fromkeys(LAYOUT)
    for name, path in paths.items():
        if path is not None and not inside_folder(root, path):  # a link out of the folder: never read
            problems.append(Problem(str(path.relative_to(root)), "", "is a symbolic link out of the dataset folder; "
                                    "not read (copy the file into the folder instead)"))
            paths[name] = None
    files = {name: (str(p.relative_to(root)) if p else None) for name, p in paths.items()}
    if not root.is_dir():
        problems.append(Problem(str(root), "", "is not a folder"))
    elif not any(paths.values()):
        problems.append(
            Problem(str(root), "", "no PAL-Set files found (expected e.g. background/background.json, input.json)")
        )
    raw: dict[str, Any] = {}
    for name, path in paths.items():
        if path is not None:
            data, probs = read_json(path, files[name] or name)
            problems += probs
            raw[name] = data
    parts: dict[str, dict[str, Any]] = {}
    for name, adapter in _ADAPTERS.items():
        if raw.get(name) is not None:
            parts[name] = _validate_per_user(files[name] or name, raw[name], adapter, problems)
    samples_file = files.get("samples") or "input.json"
    raw_samples = _raw_samples_per_user(samples_file, raw.get("samples"), problems)
    templates = _validate_templates(files.get("dialogue_template") or "", raw.get("dialogue_template"), problems)
    if "timeline" in parts:
        parts["timeline"] = _normalise_months(files["timeline"] or "", parts["timeline"], problems)
    if "situations" in parts:
        parts["situations"] = _drop_bad_date_keys(files["situations"] or "", parts["situations"], problems)

    uids = sorted(set(raw_samples).union(*(p.keys() for p in parts.values())))
    users = {uid: _build_user(uid, parts, raw_samples.get(uid)) for uid in uids}
    languages = [u.language for u in users.values()]
    language = "en" if not languages or languages.count("en") >= languages.count("zh") else "zh"
    dataset = Dataset(
        root=root, name=root.name, language=language, users=users, files=files, problems=problems,
        templates=templates,
    )
    dataset.problems.extend(check_user_files(dataset, parts))
    dataset.problems.extend(check_users_in_every_file(
        {n: set(d) for n, d in raw.items() if n != "dialogue_template" and isinstance(d, dict)}, files))
    if (root / JOURNAL).is_file():
        dataset.problems.append(Problem(JOURNAL, "", "a write of several release files was interrupted; the next write "
                                        "to this folder (pal dataset assemble, pal generate --resume) finishes it"))
    for uid, user in users.items():
        if uid in raw_samples:
            user.set_session_loader(partial(_load_sessions, dataset, user, raw_samples[uid], parts, samples_file))
    if not lazy:
        dataset.load_all()
        dataset.problems.extend(check_templates(dataset))
    return dataset


def _validate_per_user(
    shown: str, data: object, adapter: TypeAdapter[Any], problems: list[Problem]
) -> dict[str, Any]:
    if not isinstance(data, dict):
        problems.append(Problem(shown, "", f"expected an object keyed by user id, got {type(data).__name__}"))
        return {}
    out: dict[str, Any] = {}
    for uid, entry in data.items():
        try:
            out[uid] = adapter.validate_python(entry)
        except ValidationError as e:
            problems += problems_from_validation(shown, (uid,), e)
    return out


def _raw_samples_per_user(shown: str, data: object, problems: list[Problem]) -> dict[str, dict[str, list]]:
    """Split ``input.json`` into each user's raw history/query lists (validated later, per user)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append(Problem(shown, "", f"expected an object keyed by user id, got {type(data).__name__}"))
        return {}
    out: dict[str, dict[str, list]] = {}
    for uid, entry in data.items():
        if not isinstance(entry, dict):
            problems.append(Problem(shown, uid, "expected an object with 'history' and 'query' lists"))
            continue
        for key in entry:
            if key not in ("history", "query"):
                problems.append(Problem(shown, f"{uid}.{key}", "unknown field (expected 'history' and 'query')"))
        out[uid] = {}
        for split in ("history", "query"):
            items = entry.get(split, [])
            if not isinstance(items, list):
                problems.append(Problem(shown, f"{uid}.{split}", f"expected a list of sessions, got {type(items).__name__}"))
                items = []
            out[uid][split] = items
    return out


def _raw_counts(raw: dict[str, list]) -> SessionCounts:
    def size(obj: object, key: str) -> int:
        value = obj.get(key) if isinstance(obj, dict) else None
        return len(value) if isinstance(value, (list, dict)) else 0

    history, query = raw.get("history", []), raw.get("query", [])
    return SessionCounts(
        sessions=len(history) + len(query),
        history_sessions=len(history),
        query_sessions=len(query),
        logs=sum(size(s, "logs") for s in history + query),
        dialogue_turns=sum(size(s, "dialogue") for s in history + query),
        topics=sum(size(s, "topics") for s in history + query),
        query_topics=sum(size(s, "topics") for s in query),
    )


def _load_sessions(dataset: Dataset, user: User, raw: dict[str, list], parts: dict, shown: str) -> list[Session]:
    """Validate and build one user's sessions; their problems join the dataset's."""
    problems: list[Problem] = []
    framework = parts.get("requirement_framework", {}).get(user.uid, {})
    sol_pref = parts.get("solution_preference", {}).get(user.uid, {})
    sessions: list[Session] = []
    for split in ("history", "query"):
        for i, item in enumerate(raw.get(split, [])):
            try:
                sample = _SAMPLE.validate_python(item)
            except ValidationError as e:
                problems += problems_from_validation(shown, (user.uid, split, i), e)
                continue
            sessions.append(_build_session(sample, split, user, framework, sol_pref))
    problems += check_user_sessions(user, sessions, shown, has_profiles=dataset.files.get("profiles") is not None)
    dataset.problems.extend(problems)
    return sessions


def _validate_templates(shown: str, data: object, problems: list[Problem]) -> dict[str, list[Any]]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append(Problem(shown, "", "expected an object keyed by task id"))
        return {}
    out: dict[str, list[Any]] = {}
    for task_id, turns in data.items():
        try:
            parsed = _TEMPLATE.validate_python(turns)
        except ValidationError as e:
            problems += problems_from_validation(shown, (task_id,), e)
            continue
        out[task_id] = list(parsed.values())
    return out


def _normalise_months(shown: str, timelines: dict[str, dict[str, str]], problems: list[Problem]) -> dict[str, Any]:
    """Month keys ``2024年9月`` (release) and ``2024-09`` both become ``2024-09``."""
    out: dict[str, dict[str, str]] = {}
    for uid, months in timelines.items():
        out[uid] = {}
        for key, text in months.items():
            m = _MONTH_ZH.match(key) or _MONTH.match(key)
            if not m or not 1 <= int(m.group(2)) <= 12:
                problems.append(Problem(shown, f"{uid}.{key}", f'"{key}" is not a month like "2024-09" or "2024年9月"'))
                continue
            out[uid][f"{m.group(1)}-{int(m.group(2)):02d}"] = text
    return out


def _drop_bad_date_keys(shown: str, situations: dict[str, dict[str, Situation]], problems: list[Problem]) -> dict:
    out: dict[str, dict[str, Situation]] = {}
    for uid, by_date in situations.items():
        out[uid] = {}
        for key, sit in by_date.items():
            if not _DATE_KEY.match(key):
                problems.append(Problem(shown, f"{uid}.{key}", f'"{key}" is not an end date YYYY-MM-DD'))
                continue
            out[uid][key] = sit
    return out


def detect_language(*texts: str) -> str:
    """``zh`` when CJK characters make up a noticeable share of the text, else ``en``."""
    joined = "".join(texts)[:4000]
    if not joined:
        return "en"
    return "zh" if len(_CJK.findall(joined)) / len(joined) > 0.15 else "en"


def _build_user(uid: str, parts: dict[str, dict[str, Any]], raw: dict[str, list] | None) -> User:
    profile: Profile | None = parts.get("profiles", {}).get(uid)
    req_types = parts.get("requirement_types", {}).get(uid, {})
    prefs_by_aspect = parts.get("preferences", {}).get(uid, {})
    preferences = {rid: p for per in prefs_by_aspect.values() for rid, p in per.items()}
    texts = [profile.occupation + profile.hobbies] if profile else []
    if raw:
        first = (raw.get("history") or raw.get("query") or [None])[0]
        logs = first.get("logs") if isinstance(first, dict) else None
        if isinstance(logs, list):
            texts += [str(lg.get("content", "")) for lg in logs[:20] if isinstance(lg, dict)]
    return User(
        uid=uid,
        language=detect_language(*texts, *(t for per in req_types.values() for t in per.values())),
        profile=profile,
        requirement_types=req_types,
        preferences=preferences,
        timeline=dict(sorted(parts.get("timeline", {}).get(uid, {}).items())),
        situations=dict(sorted(parts.get("situations", {}).get(uid, {}).items())),
        raw_counts=_raw_counts(raw) if raw else SessionCounts(),
    )


def _build_session(sample: Sample, split: str, user: User, framework: dict, sol_pref: dict) -> Session:
    end_date = sample.dialogue_timestamp.date().isoformat()
    situation: Situation | None = user.situations.get(end_date)
    topics = []
    for k, (key, topic) in enumerate(sample.topics.items()):
        req_id = situation.requirement_ids[k] if situation and k < len(situation.requirement_ids) else None
        topics.append(
            SessionTopic(
                key=key,
                topic=topic,
                requirement_type_id=req_id,
                requirement_type=user.requirement_phrase(req_id) if req_id else None,
                framework=framework.get(end_date, {}).get(key),
                solution_preference=sol_pref.get(end_date, {}).get(key),
            )
        )
    return Session(
        sample_id=sample.sample_id,
        index=sample_index(sample.sample_id),
        split=split,
        dialogue_timestamp=sample.dialogue_timestamp,
        logs=[_typed(lg) for lg in sample.logs],
        turns=list(sample.dialogue.values()),
        topics=topics,
        situation_id=end_date if situation else None,
    )


def _typed(log: Log) -> Log:
    if log.type is not None:
        return log
    return log.model_copy(update={"type": infer_log_type(log.content), "type_inferred": True})
