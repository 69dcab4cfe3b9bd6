"""Pure builders for the Users page: gallery filtering and the log explorer table."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

import pandas as pd

from palset.dataset import Dataset, User

TRAIT_LETTERS = {"Openness": "O", "Conscientiousness": "C", "Extraversion": "E", "Agreeableness": "A", "Neuroticism": "N"}


@dataclass
class GalleryFilter:
    """What a person typed and picked above the gallery."""

    text: str = ""
    languages: list[str] = field(default_factory=list)
    genders: list[str] = field(default_factory=list)
    trait: str | None = None
    level: str | None = None
    min_sessions: int = 0


def big_five_short(user: User) -> str:
    """``O high · C low · …`` for a card."""
    if not user.profile:
        return "Big Five unknown"
    return " · ".join(f"{TRAIT_LETTERS[t]} {v}" for t, v in user.profile.personality.as_dict().items())


def _haystack(user: User) -> str:
    p = user.profile
    parts = [user.uid]
    if p:
        parts += [p.name, p.occupation, p.hobbies, p.family_members, p.health_status, p.gender]
    return " ".join(parts).lower()


def filter_users(dataset: Dataset, flt: GalleryFilter) -> list[User]:
    """Users matching every given criterion, in id order."""
    words = flt.text.lower().split()
    out = []
    for user in dataset.users.values():
        if words and not all(w in _haystack(user) for w in words):
            continue
        if flt.languages and user.language not in flt.languages:
            continue
        if flt.genders and (not user.profile or user.profile.gender not in flt.genders):
            continue
        if flt.trait and flt.level:
            if not user.profile or user.profile.personality.as_dict().get(flt.trait) != flt.level:
                continue
        if user.counts.sessions < flt.min_sessions:
            continue
        out.append(user)
    return out


def gallery_frame(users: list[User]) -> pd.DataFrame:
    """One row per user, for the table view and the CSV export of the gallery."""
    rows = []
    for u in users:
        c = u.counts
        p = u.profile
        rows.append(
            {
                "id": u.uid,
                "name": p.name if p else "",
                "age": p.age if p else None,
                "gender": p.gender if p else "",
                "language": u.language,
                "big_five": big_five_short(u),
                "sessions": c.sessions,
                "query_sessions": c.query_sessions,
                "logs": c.logs,
                "topics": c.topics,
                "occupation": p.occupation if p else "",
            }
        )
    return pd.DataFrame(rows)


@dataclass
class LogFilter:
    types: list[str] = field(default_factory=list)
    start: date | None = None
    end: date | None = None
    text: str = ""
    session: str | None = None


def log_frame(user: User, flt: LogFilter | None = None) -> pd.DataFrame:
    """Every log of the user (optionally filtered), with its session and whether its type was inferred."""
    flt = flt or LogFilter()
    needle = flt.text.lower().strip()
    rows = []
    for s in user.sessions:
        if flt.session and s.sample_id != flt.session:
            continue
        for i, lg in enumerate(s.logs):
            type_name = lg.type.value if lg.type else ""
            if flt.types and type_name not in flt.types:
                continue
            day = lg.timestamp.date()
            if (flt.start and day < flt.start) or (flt.end and day > flt.end):
                continue
            if needle and needle not in lg.content.lower():
                continue
            rows.append(
                {
                    "time": lg.timestamp,
                    "session": s.sample_id,
                    "log_id": f"log_{i}",
                    "type": type_name + (" (inferred)" if lg.type_inferred else ""),
                    "content": lg.content,
                }
            )
    return pd.DataFrame(rows, columns=["time", "session", "log_id", "type", "content"])
