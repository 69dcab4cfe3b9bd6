"""Cross-record and cross-file checks that a per-field schema cannot express.

Each check returns :class:`Problem` records pointing at the file and JSON path a person has to
edit: duplicate ids, dangling requirement ids, logs after the dialogue time, acts played by the
wrong role, candidate labels that break the 2 pos / 2 neg rule, and so on.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from palset.files import LAYOUT
from palset.problems import Problem
from palset.vocab import ASSISTANT_ACTS, USER_ACTS, Act

if TYPE_CHECKING:
    from palset.dataset import Dataset, Session, User


def _file_names(dataset: Dataset) -> dict[str, str]:
    return {k: dataset.files.get(k) or f"{stem}.json" for k, stem in LAYOUT.items()}


def check_user_files(dataset: Dataset, parts: dict[str, dict[str, Any]]) -> list[Problem]:
    """Checks across the small per-user files (ids, situations, framework keys)."""
    files = _file_names(dataset)
    problems: list[Problem] = []
    for user in dataset.users.values():
        problems += _check_user_files(user, dataset, parts, files)
    return problems


def check_users_in_every_file(user_ids: dict[str, set[str]], files: dict[str, str | None]) -> list[Problem]:
    """A user in some per-user release files and not in others (what a write interrupted between files leaves):
    one error per file the user is missing from. ``user_ids``: the file's logical name → the user ids it holds."""
    problems: list[Problem] = []
    everyone = set().union(*user_ids.values()) if user_ids else set()
    for name, uids in user_ids.items():
        for uid in sorted(everyone - uids):
            where = sorted(files.get(n) or n for n, held in user_ids.items() if uid in held)
            problems.append(Problem(files.get(name) or name, uid, f"user {uid} is missing here but is in "
                                    f"{', '.join(where)} (a write interrupted between files leaves a user half-added: "
                                    "write the user again, or remove it from those files)"))
    return problems


def check_user_sessions(user: User, sessions: list[Session], shown: str, has_profiles: bool) -> list[Problem]:
    """Checks of one user's built sessions (run when the sessions are built)."""
    problems = _check_duplicate_sessions(user, sessions, shown)
    problems += _check_sessions(user, sessions, shown)
    if sessions and has_profiles and user.profile is None:
        problems.append(Problem(shown, user.uid, "user has sessions but no profile"))
    return problems


def _where(session: Session, sessions: list[Session], uid: str) -> str:
    same_split = [s for s in sessions if s.split == session.split]
    return f"{uid}.{session.split}[{same_split.index(session)}]"


def _check_duplicate_sessions(user: User, sessions: list[Session], shown: str) -> list[Problem]:
    seen: dict[str, str] = {}
    problems = []
    for s in sessions:
        where = _where(s, sessions, user.uid)
        if s.sample_id in seen:
            problems.append(Problem(shown, f"{where}.sample_id", f'duplicate id "{s.sample_id}" (also at {seen[s.sample_id]})'))
        else:
            seen[s.sample_id] = where
        if not s.sample_id.startswith(f"{user.uid}_"):
            problems.append(Problem(shown, f"{where}.sample_id", f'"{s.sample_id}" does not belong to user {user.uid}'))
    return problems


def _check_user_files(user: User, dataset: Dataset, parts: dict[str, dict[str, Any]], files: dict[str, str]) -> list[Problem]:
    problems: list[Problem] = []
    uid = user.uid
    known_ids = {rid for per in user.requirement_types.values() for rid in per}
    for aspect, per in user.requirement_types.items():
        for rid in per:
            if not rid.startswith(f"{aspect}-"):
                problems.append(Problem(files["requirement_types"], f"{uid}.{aspect}.{rid}", f"id does not belong to aspect '{aspect}'"))
    has_types = dataset.files.get("requirement_types") is not None
    if has_types and user.preferences:
        for rid in user.preferences:
            if rid not in known_ids:
                aspect = rid.split("-", 1)[0]
                problems.append(Problem(files["preferences"], f"{uid}.{aspect}.{rid}", f"dangling requirement id '{rid}' (not in {files['requirement_types']})"))
    if has_types:
        for end_date, sit in user.situations.items():
            for j, rid in enumerate(sit.requirement_ids):
                if rid not in known_ids:
                    problems.append(Problem(files["situations"], f"{uid}.{end_date}.requirement_ids[{j}]", f"dangling requirement id '{rid}'"))
    for end_date, sit in user.situations.items():
        if sit.end_timestamp.date().isoformat() != end_date:
            problems.append(Problem(files["situations"], f"{uid}.{end_date}.end_timestamp", f"end date {sit.end_timestamp.date()} differs from the key {end_date}"))
        if sit.start_timestamp >= sit.end_timestamp:
            problems.append(Problem(files["situations"], f"{uid}.{end_date}.start_timestamp", "situation starts after it ends"))
    if dataset.files.get("situations") is not None:
        for name in ("requirement_framework", "candidate_solutions", "solution_preference"):
            for end_date, topics in parts.get(name, {}).get(uid, {}).items():
                found = user.situations.get(end_date)
                if found is None:
                    problems.append(Problem(files[name], f"{uid}.{end_date}", f"no situation ends on {end_date}"))
                    continue
                sit = found
                for key in topics:
                    k = _topic_k(key)
                    if k is None or k > len(sit.requirement_ids):
                        problems.append(Problem(files[name], f"{uid}.{end_date}.{key}", f"situation {end_date} has only {len(sit.requirement_ids)} requirement id(s)"))
    for uid_candidates in parts.get("candidate_solutions", {}).get(uid, {}).items():
        end_date, topics = uid_candidates
        for key, cands in topics.items():
            if len(cands) != 8:
                problems.append(Problem(files["candidate_solutions"], f"{uid}.{end_date}.{key}", f"expected 8 candidate solutions, found {len(cands)}", "warning"))
    return problems


def _topic_k(key: str) -> int | None:
    head, _, num = key.partition("-")
    return int(num) if head == "topic" and num.isdigit() else None


def _check_sessions(user: User, sessions: list[Session], shown: str) -> list[Problem]:
    problems: list[Problem] = []
    previous = None
    for n, s in enumerate(sessions):
        where = _where(s, sessions, user.uid)
        if s.index != n:
            problems.append(Problem(shown, f"{where}.sample_id", f"expected {user.uid}_sample{n}: ids run 0,1,2… through history then query", "warning"))
        if previous is not None and s.dialogue_timestamp < previous.dialogue_timestamp:
            problems.append(Problem(shown, f"{where}.dialogue_timestamp", f"session at {s.dialogue_timestamp} is earlier than the session before it ({previous.dialogue_timestamp})"))
        problems += _check_logs(s, where, previous, shown)
        problems += _check_turns(s, where, shown)
        problems += _check_topics(s, where, shown)
        previous = s
    return problems


def _check_logs(s: Session, where: str, previous: Session | None, shown: str) -> list[Problem]:
    problems: list[Problem] = []
    last = None
    for j, lg in enumerate(s.logs):
        path = f"{where}.logs[{j}].timestamp"
        if lg.timestamp > s.dialogue_timestamp:
            problems.append(Problem(shown, path, f"log at {lg.timestamp:%Y-%m-%d %H:%M} is after the dialogue time {s.dialogue_timestamp:%Y-%m-%d %H:%M}"))
        if last is not None and lg.timestamp < last:
            problems.append(Problem(shown, path, f"logs are not in time order ({lg.timestamp:%Y-%m-%d %H:%M} after {last:%Y-%m-%d %H:%M})"))
        if previous is not None and lg.timestamp <= previous.dialogue_timestamp:
            problems.append(Problem(shown, path, f"log at {lg.timestamp:%Y-%m-%d %H:%M} belongs to an earlier session (before {previous.dialogue_timestamp:%Y-%m-%d %H:%M})", "warning"))
        last = lg.timestamp
    if not s.logs:
        problems.append(Problem(shown, f"{where}.logs", "session has no logs", "warning"))
    return problems


def _check_turns(s: Session, where: str, shown: str) -> list[Problem]:
    problems: list[Problem] = []
    for t, turn in enumerate(s.turns, start=1):
        if turn.user.action not in USER_ACTS:
            problems.append(Problem(shown, f"{where}.dialogue.turn_{t}.user.action", f"'{turn.user.action.value}' is not a user act"))
        if turn.assistant.action not in ASSISTANT_ACTS:
            problems.append(Problem(shown, f"{where}.dialogue.turn_{t}.assistant.action", f"'{turn.assistant.action.value}' is not an assistant act"))
        for role in ("user", "assistant"):
            text = getattr(turn, role).content.strip()
            if not text or text in {"...", "…"}:
                problems.append(Problem(shown, f"{where}.dialogue.turn_{t}.{role}.content", "utterance is empty"))
    if s.turns and s.turns[0].user.action is not Act.TOPIC_INQUIRY:
        problems.append(Problem(shown, f"{where}.dialogue.turn_1.user.action", "a dialogue starts with a Topic Inquiry", "warning"))
    return problems


def _check_topics(s: Session, where: str, shown: str) -> list[Problem]:
    problems: list[Problem] = []
    for st in s.topics:
        path = f"{where}.topics.{st.key}"
        labels = Counter(c.feedback for c in st.topic.candidate_solutions)
        if labels["pos"] != 2 or labels["neg"] != 2:
            problems.append(Problem(shown, f"{path}.candidate_solutions", f"expected exactly 2 pos and 2 neg candidates, found {labels['pos']} pos and {labels['neg']} neg"))
        if len(st.topic.candidate_solutions) != 8:
            problems.append(Problem(shown, f"{path}.candidate_solutions", f"expected 8 candidates, found {len(st.topic.candidate_solutions)}", "warning"))
        labelled = {(c.solution, c.feedback) for c in st.topic.candidate_solutions}  # a text may repeat
        for label in ("pos", "neg"):
            for j, text in enumerate(getattr(st.topic.solution, label)):
                if (text, label) not in labelled:
                    problems.append(Problem(shown, f"{path}.solution.{label}[{j}]", f"is not a candidate labelled {label}"))
        if len(st.topic.implicit_needs) != 2:
            problems.append(Problem(shown, f"{path}.implicit_needs", f"expected 2 implicit needs, found {len(st.topic.implicit_needs)}", "warning"))
    return problems


def check_templates(dataset: Dataset) -> list[Problem]:
    """Every dialogue-template id must name a session topic (needs all sessions built)."""
    shown = _file_names(dataset)["dialogue_template"]
    if not dataset.templates or dataset.is_partial:
        return []
    known = {s.task_id(t.key) for u in dataset.users.values() for s in u.sessions for t in s.topics}
    return [
        Problem(shown, task_id, "no session topic has this id")
        for task_id in dataset.templates
        if task_id not in known
    ]
