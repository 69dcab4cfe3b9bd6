"""Typed records for the PAL-Set schema (see the Mem-PAL spec, §1).

The records mirror the release files field for field (file keys are kept as aliases, e.g.
``"health status"``), so validating a file *is* parsing it into these records, and every error
carries the JSON path of the offending value. Unknown fields are rejected: in a dataset they
are almost always a typo of a known field.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, field_validator

from palset.vocab import Act, LogType, parse_act, parse_log_type

Aspect = Literal["work", "health", "family", "leisure"]
Level = Literal["low", "medium", "high"]
Feedback = Literal["pos", "neg", "neu"]
Split = Literal["history", "query"]

_MINUTE = "%Y-%m-%d %H:%M"
_SECOND = "%Y-%m-%d %H:%M:%S"


_STAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2}) (\d{1,2}):(\d{2})(?::(\d{2}))?$")


def _parse_stamp(value: object, shown: str) -> datetime:
    """Parse ``YYYY-MM-DD HH:MM[:SS]``; called for every log, so the common case is kept cheap."""
    if type(value) is str and _STAMP.match(value):
        try:
            return datetime.fromisoformat(value)  # C fast path; needs a two-digit hour
        except ValueError:
            m = _STAMP.match(value)
            try:
                y, mo, d, h, mi, sec = ([int(g) for g in m.groups() if g is not None] + [0] * 6)[:6] if m else [0] * 6
                return datetime(y, mo, d, h, mi, sec)
            except ValueError:
                pass
    elif isinstance(value, datetime):
        return value
    elif not isinstance(value, str):
        raise ValueError(f"{value!r} is not a timestamp {shown}")
    raise ValueError(f'"{value}" is not {shown}')


def _log_stamp(value: object) -> datetime:
    return _parse_stamp(value, "YYYY-MM-DD HH:MM")


def _session_stamp(value: object) -> datetime:
    return _parse_stamp(value, "YYYY-MM-DD HH:MM:SS")


def _day(value: object) -> date:
    if isinstance(value, date):
        return value
    try:
        return datetime.strptime(str(value).strip(), "%Y-%m-%d").date()
    except ValueError:
        raise ValueError(f'"{value}" is not a date YYYY-MM-DD') from None


def _act(value: object) -> Act:
    if type(value) is str:
        return parse_act(value)
    if isinstance(value, Act):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a dialogue act label")
    return parse_act(value)


def _log_type(value: object) -> LogType | None:
    if type(value) is str:
        return parse_log_type(value)
    if value is None or isinstance(value, LogType):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a log type")
    return parse_log_type(value)


LogStamp = Annotated[datetime, BeforeValidator(_log_stamp), PlainSerializer(lambda d: d.strftime(_MINUTE))]
SessionStamp = Annotated[datetime, BeforeValidator(_session_stamp), PlainSerializer(lambda d: d.strftime(_SECOND))]
Day = Annotated[date, BeforeValidator(_day), PlainSerializer(lambda d: d.isoformat())]
ActLabel = Annotated[Act, BeforeValidator(_act)]
LogTypeLabel = Annotated[LogType | None, BeforeValidator(_log_type)]
Text = Annotated[str, Field(min_length=1)]

_SAMPLE_ID = re.compile(r"^(?P<uid>[^_\s]+)_sample(?P<index>\d+)$")
_TOPIC_KEY = re.compile(r"^topic-(?P<k>[1-9]\d*)$")
_REQ_ID = re.compile(r"^(work|health|family|leisure)-[1-9]\d*$")


class Record(BaseModel):
    """Base of every dataset record: strict about unknown keys, aliases = file keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False)


# ---------------------------------------------------------------- profile (background.json)


class BigFive(Record):
    openness: Level = Field(alias="Openness")
    conscientiousness: Level = Field(alias="Conscientiousness")
    extraversion: Level = Field(alias="Extraversion")
    agreeableness: Level = Field(alias="Agreeableness")
    neuroticism: Level = Field(alias="Neuroticism")

    def as_dict(self) -> dict[str, str]:
        """Trait name → level, in the canonical Big Five order."""
        return self.model_dump(by_alias=True)


class Profile(Record):
    """A user's profile: the PAL-Set ``background.json`` entry."""

    id: str | None = None  # only in seed_users.json
    name: Text
    gender: Text
    age: int = Field(ge=0, le=130)
    occupation: Text
    health_status: Text = Field(alias="health status")
    family_members: Text = Field(alias="family members")
    hobbies: Text
    personality: BigFive


# ---------------------------------------------------------------- requirement types and preferences


class PreferencePair(Record):
    pos: Text
    neg: Text


class Preference(Record):
    """The pos/neg preference of one requirement type (``preference.json``)."""

    requirement: Text
    preference: PreferencePair


RequirementTypes = dict[Aspect, dict[str, Text]]
Preferences = dict[Aspect, dict[str, Preference]]

# ---------------------------------------------------------------- situations and timeline


class Situation(Record):
    """A situation (``situation.json``): a span of the user's life tied to 1–3 requirement types."""

    start_timestamp: SessionStamp
    end_timestamp: SessionStamp
    requirement_ids: list[Text] = Field(min_length=1, max_length=3)
    situation: Text

    @field_validator("requirement_ids")
    @classmethod
    def _ids_well_formed(cls, ids: list[str]) -> list[str]:
        bad = [i for i in ids if not _REQ_ID.match(i)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a requirement id like 'work-1'")
        if len(set(ids)) != len(ids):
            raise ValueError("requirement ids repeat")
        return ids


# ---------------------------------------------------------------- dialogue framework files


class ImplicitNeed(Record):
    need: Text
    evidences: list[Text] = Field(default_factory=list, max_length=5)


class FrameworkTopic(Record):
    """A topic of ``requirement_framework.json``: where the implicit needs keep their evidences."""

    requirement_type: Text
    user_query: Text
    implicit_needs: list[ImplicitNeed] = Field(min_length=1)
    requirement: Text


class FeedbackReason(Record):
    solution: Text
    feedback_reason: Text


class SolutionPreference(Record):
    """A topic of ``solution_preference.json``: the 2 liked and 2 disliked candidates with reasons."""

    analysis: str = ""
    pos_list: list[FeedbackReason] = Field(min_length=1)
    neg_list: list[FeedbackReason] = Field(min_length=1)


# ---------------------------------------------------------------- input.json samples


class Log(Record):
    """One interaction log. ``type`` is absent in the release and then inferred (``type_inferred``)."""

    timestamp: LogStamp
    content: Text
    type: LogTypeLabel = None
    event: str | None = None
    type_inferred: bool = False


class Utterance(Record):
    action: ActLabel
    content: str


class Turn(Record):
    user: Utterance
    assistant: Utterance


class SolutionSplit(Record):
    pos: list[Text]
    neg: list[Text]


class Candidate(Record):
    solution: Text
    feedback: Feedback


class Topic(Record):
    """A topic of a session: vague query, implicit needs, full requirement, 8 labelled candidates."""

    user_query: Text
    implicit_needs: list[Text] = Field(min_length=1)
    requirement: Text
    solution: SolutionSplit
    candidate_solutions: list[Candidate] = Field(min_length=1)


class Sample(Record):
    """A session ("sample"): the logs since the previous dialogue, the dialogue and its topics."""

    sample_id: Text
    dialogue_timestamp: SessionStamp
    logs: list[Log]
    dialogue: dict[str, Turn]
    topics: dict[str, Topic]

    @field_validator("sample_id")
    @classmethod
    def _sample_id_form(cls, v: str) -> str:
        if not _SAMPLE_ID.match(v):
            raise ValueError(f'"{v}" is not a sample id like "0000_sample12"')
        return v

    @field_validator("dialogue")
    @classmethod
    def _turn_keys(cls, turns: dict[str, Turn]) -> dict[str, Turn]:
        expected = [f"turn_{i}" for i in range(1, len(turns) + 1)]
        if list(turns) != expected:
            raise ValueError(f"turn ids must be turn_1…turn_{len(turns)} in order, got {list(turns)[:6]}")
        return turns

    @field_validator("topics")
    @classmethod
    def _topic_keys(cls, topics: dict[str, Topic]) -> dict[str, Topic]:
        expected = [f"topic-{i}" for i in range(1, len(topics) + 1)]
        if list(topics) != expected:
            raise ValueError(f"topic keys must be topic-1…topic-{len(topics)} in order, got {list(topics)}")
        return topics


# ---------------------------------------------------------------- dialogue_template.json


class TemplateTurn(Record):
    user: ActLabel
    assistant: ActLabel


def sample_index(sample_id: str) -> int:
    """The chronological index i of ``{uid}_sample{i}``."""
    m = _SAMPLE_ID.match(sample_id)
    if not m:
        raise ValueError(f"{sample_id!r} is not a sample id")
    return int(m.group("index"))


def topic_number(topic_key: str) -> int:
    """k of ``topic-k`` (1-based)."""
    m = _TOPIC_KEY.match(topic_key)
    if not m:
        raise ValueError(f"{topic_key!r} is not a topic key")
    return int(m.group("k"))
