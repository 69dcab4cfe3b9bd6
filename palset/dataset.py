"""The joined, read-only view of a dataset that the app and every pipeline work with.

Files are joined on ids only (never on text): a session is linked to its situation by
``dialogue_timestamp[:10] == end_date``, a topic ``topic-k`` to the situation's
``requirement_ids[k-1]``, and from there to the requirement type and its preference.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from palset.models import (
    FrameworkTopic,
    Log,
    Preference,
    Profile,
    Situation,
    SolutionPreference,
    Split,
    TemplateTurn,
    Topic,
    Turn,
)
from palset.problems import Problem


class View(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class SessionTopic(View):
    """A topic of a session together with what the other files know about it."""

    key: str  # "topic-1"
    topic: Topic
    requirement_type_id: str | None = None
    requirement_type: str | None = None
    framework: FrameworkTopic | None = None  # implicit needs with evidences
    solution_preference: SolutionPreference | None = None

    def liked_and_disliked(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(solution, reason) pairs the user likes and dislikes; reasons only where the dataset has them."""
        if sp := self.solution_preference:
            return ([(r.solution, r.feedback_reason) for r in sp.pos_list],
                    [(r.solution, r.feedback_reason) for r in sp.neg_list])
        return [(s, "") for s in self.topic.solution.pos], [(s, "") for s in self.topic.solution.neg]


class Session(View):
    """One dialogue session ("sample") with its logs, turns and topics."""

    sample_id: str
    index: int
    split: Split
    dialogue_timestamp: datetime
    logs: list[Log]
    turns: list[Turn]
    topics: list[SessionTopic]
    situation_id: str | None = None  # end date "YYYY-MM-DD"

    def task_id(self, topic_key: str) -> str:
        """The dialogue-task id ``{uid}_sample{i}_topic-{k}`` used by templates and FairEval."""
        return f"{self.sample_id}_{topic_key}"


class SessionCounts(View):
    """How much a user has, countable without validating their sessions (for galleries)."""

    sessions: int = 0
    history_sessions: int = 0
    query_sessions: int = 0
    logs: int = 0
    dialogue_turns: int = 0
    topics: int = 0
    query_topics: int = 0


class User(View):
    """Everything the dataset knows about one synthetic user.

    Sessions are validated and built on first access (``user.sessions``): a dataset of PAL-Set's
    size opens in the time it takes to read its files, and a user's ~1,000 logs are parsed only
    when someone looks at that user. ``load_dataset(..., lazy=False)`` builds everything at once.
    """

    uid: str
    language: str  # "en" | "zh"
    profile: Profile | None = None
    requirement_types: dict[str, dict[str, str]] = Field(default_factory=dict)
    preferences: dict[str, Preference] = Field(default_factory=dict)  # by requirement id
    timeline: dict[str, str] = Field(default_factory=dict)  # "2024-09" → paragraph
    situations: dict[str, Situation] = Field(default_factory=dict)  # by end date
    raw_counts: SessionCounts = Field(default_factory=SessionCounts)
    _sessions: list[Session] | None = PrivateAttr(default=None)
    _session_loader: Callable[[], list[Session]] | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _derived: dict = PrivateAttr(default_factory=dict)

    @property
    def derived_cache(self) -> dict:
        """Per-user memo for values derived from the (immutable once loaded) sessions, e.g. token counts."""
        return self._derived

    def set_session_loader(self, loader: Callable[[], list[Session]]) -> None:
        self._sessions, self._session_loader = None, loader

    @property
    def sessions(self) -> list[Session]:
        """The user's sessions in time order (history, then query); built on first access."""
        if self._sessions is None:
            with self._lock:
                if self._sessions is None:
                    loader, self._session_loader = self._session_loader, None
                    self._sessions = loader() if loader else []
        return self._sessions

    @property
    def sessions_loaded(self) -> bool:
        return self._sessions is not None

    @property
    def counts(self) -> SessionCounts:
        """Exact counts once sessions are built, else those read from the raw file."""
        if not self.sessions_loaded:
            return self.raw_counts
        return SessionCounts(
            sessions=len(self.sessions),
            history_sessions=len(self.history),
            query_sessions=len(self.query),
            logs=self.log_count,
            dialogue_turns=sum(len(s.turns) for s in self.sessions),
            topics=sum(len(s.topics) for s in self.sessions),
            query_topics=sum(len(s.topics) for s in self.query),
        )

    @property
    def name(self) -> str:
        return self.profile.name if self.profile else self.uid

    @property
    def history(self) -> list[Session]:
        return [s for s in self.sessions if s.split == "history"]

    @property
    def query(self) -> list[Session]:
        return [s for s in self.sessions if s.split == "query"]

    def session(self, sample_id: str) -> Session | None:
        return next((s for s in self.sessions if s.sample_id == sample_id), None)

    def requirement_phrase(self, req_id: str) -> str | None:
        aspect = req_id.split("-", 1)[0]
        return self.requirement_types.get(aspect, {}).get(req_id)

    @property
    def log_count(self) -> int:
        return sum(len(s.logs) for s in self.sessions)

    def span(self) -> tuple[date, date] | None:
        """First and last day covered by the user's situations, logs and sessions."""
        days: list[date] = [s.start_timestamp.date() for s in self.situations.values()]
        days += [s.end_timestamp.date() for s in self.situations.values()]
        for s in self.sessions:
            days.append(s.dialogue_timestamp.date())
            days += [lg.timestamp.date() for lg in s.logs[:1]]
        return (min(days), max(days)) if days else None


class Dataset(View):
    """A loaded dataset folder: users, which files exist, and every problem found."""

    root: Path
    name: str
    language: str
    users: dict[str, User]
    files: dict[str, str | None]  # logical name → path relative to root, or None
    problems: list[Problem] = Field(default_factory=list)
    templates: dict[str, list[TemplateTurn]] = Field(default_factory=dict)

    @property
    def missing(self) -> list[str]:
        """Logical names of release files that are absent."""
        return [name for name, path in self.files.items() if path is None]

    @property
    def is_partial(self) -> bool:
        return self.files.get("samples") is None

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.level == "error"]

    def load_all(self) -> Dataset:
        """Build every user's sessions now (validation needs them all)."""
        for user in self.users.values():
            user.sessions  # noqa: B018 - the property builds them
        return self


def dataset_key(root: Path) -> str:
    """A stable name for a dataset folder in build ids, run specs and collection names (its resolved path)."""
    return str(Path(root).resolve())


def dataset_digest(root: str | Path) -> str:
    """Eight hex digits of the dataset's key, for ids that must stay short (an experiment's job id): the same
    folder gives the same digest, and a home where the dataset lives elsewhere derives its own."""
    return hashlib.sha1(dataset_key(Path(root)).encode()).hexdigest()[:8]
