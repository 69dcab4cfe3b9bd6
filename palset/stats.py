"""Counts over a dataset, as printed by ``pal stats`` and shown in the Users gallery."""

from __future__ import annotations

from collections import Counter

from palset.dataset import Dataset, User
from palset.vocab import LogType


def user_stats(user: User) -> dict[str, object]:
    """Session, log, turn and topic counts for one user, plus logs per type."""
    types = Counter(lg.type.value for s in user.sessions for lg in s.logs if lg.type)
    return {
        "sessions": len(user.sessions),
        "history_sessions": len(user.history),
        "query_sessions": len(user.query),
        "logs": user.log_count,
        "dialogue_turns": sum(len(s.turns) for s in user.sessions),
        "topics": sum(len(s.topics) for s in user.sessions),
        "query_topics": sum(len(s.topics) for s in user.query),
        "situations": len(user.situations),
        "log_types": {t.value: types.get(t.value, 0) for t in LogType},
        "inferred_log_types": sum(1 for s in user.sessions for lg in s.logs if lg.type_inferred),
    }


def dataset_stats(dataset: Dataset) -> dict[str, object]:
    """Totals over all users and the same counts ``per_user``."""
    per_user = {uid: user_stats(u) for uid, u in dataset.users.items()}
    totals: dict[str, object] = {"users": len(per_user)}
    for key in ("sessions", "history_sessions", "query_sessions", "logs", "dialogue_turns", "topics",
                "query_topics", "situations", "inferred_log_types"):
        totals[key] = sum(s[key] for s in per_user.values())  # type: ignore[misc]  # per-user stats hold ints under these keys
    totals["log_types"] = {
        t.value: sum(s["log_types"][t.value] for s in per_user.values())  # type: ignore[index]  # log_types is a dict of counts
        for t in LogType
    }
    totals["language"] = dataset.language
    totals["missing_files"] = dataset.missing
    totals["per_user"] = per_user
    return totals
