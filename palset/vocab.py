"""Controlled vocabularies of PAL-Set: aspects, dialogue acts and log types, in Chinese and English.

PAL-Set stores Chinese labels (``话题询问``), the dialogue template wraps them in angle brackets
(``<话题询问>``) and translated data may use the English names of the paper's Appendix. Every
reader goes through :func:`parse_act` / :func:`parse_log_type` so all spellings meet one enum.
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache

ASPECTS: tuple[str, ...] = ("work", "health", "family", "leisure")
BIG_FIVE: tuple[str, ...] = ("Openness", "Conscientiousness", "Extraversion", "Agreeableness", "Neuroticism")
LEVELS: tuple[str, ...] = ("low", "medium", "high")


class Act(StrEnum):
    """A dialogue act (PAL-Set "action"); the value is the English name from the Appendix."""

    TOPIC_INQUIRY = "Topic Inquiry"
    REQUIREMENT_CONFIRMATION = "Requirement Confirmation"
    SOLUTION_DISCUSSION = "Solution Discussion"
    SOLUTION_FEEDBACK = "Solution Feedback"
    REQUIREMENT_PREDICTION = "Requirement Prediction"
    SOLUTION_PROPOSAL = "Solution Proposal"
    FEEDBACK_RESPONSE = "Feedback Response"

    @property
    def zh(self) -> str:
        return _ACT_ZH[self]


_ACT_ZH = {
    Act.TOPIC_INQUIRY: "话题询问",
    Act.REQUIREMENT_CONFIRMATION: "需求确认",
    Act.SOLUTION_DISCUSSION: "方案讨论",
    Act.SOLUTION_FEEDBACK: "方案反馈",
    Act.REQUIREMENT_PREDICTION: "需求推测",
    Act.SOLUTION_PROPOSAL: "方案提议",
    Act.FEEDBACK_RESPONSE: "反馈回应",
}
USER_ACTS = frozenset({Act.TOPIC_INQUIRY, Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_DISCUSSION, Act.SOLUTION_FEEDBACK})
ASSISTANT_ACTS = frozenset(
    {Act.REQUIREMENT_PREDICTION, Act.SOLUTION_PROPOSAL, Act.SOLUTION_DISCUSSION, Act.FEEDBACK_RESPONSE}
)
# Spellings used by prompts and older files for the same acts.
_ACT_ALIASES = {
    "topic query": Act.TOPIC_INQUIRY,
    "need confirmation": Act.REQUIREMENT_CONFIRMATION,
    "need inference": Act.REQUIREMENT_PREDICTION,
    "requirement inference": Act.REQUIREMENT_PREDICTION,
}
_ACT_LOOKUP = {**{a.value.lower(): a for a in Act}, **{v: k for k, v in _ACT_ZH.items()}, **_ACT_ALIASES}


@lru_cache(maxsize=256)
def parse_act(label: str) -> Act:
    """Return the act for a Chinese label, an English name or an angle-bracketed template label."""
    key = label.strip().strip("<>").strip()
    act = _ACT_LOOKUP.get(key) or _ACT_LOOKUP.get(key.lower())
    if act is None:
        raise ValueError(f"{label!r} is not a dialogue act (expected one of: {', '.join(a.value for a in Act)})")
    return act


class LogType(StrEnum):
    """The 8 interaction-log types of PAL-Set (Appendix Table 6)."""

    WEB_SEARCH = "Web Search"
    CONTENT_PUBLISHING = "Content Publishing"
    CONTENT_BROWSING = "Content Browsing"
    MESSAGE_SENDING = "Message Sending"
    MESSAGE_RECEIVING = "Message Receiving"
    SCHEDULE_MANAGEMENT = "Schedule Management"
    TRANSACTION_RECORD = "Transaction Record"
    DEVICE_OPERATION = "Device Operation"

    @property
    def zh(self) -> str:
        return _LOG_ZH[self]


_LOG_ZH = {
    LogType.WEB_SEARCH: "网页搜索",
    LogType.CONTENT_PUBLISHING: "内容发布",
    LogType.CONTENT_BROWSING: "内容浏览",
    LogType.MESSAGE_SENDING: "消息发送",
    LogType.MESSAGE_RECEIVING: "消息接收",
    LogType.SCHEDULE_MANAGEMENT: "日程管理",
    LogType.TRANSACTION_RECORD: "交易记录",
    LogType.DEVICE_OPERATION: "设备操作",
}
_LOG_LOOKUP = {**{t.value.lower(): t for t in LogType}, **{v: k for k, v in _LOG_ZH.items()}}


@lru_cache(maxsize=256)
def parse_log_type(label: str) -> LogType:
    """Return the log type for a Chinese or English label."""
    t = _LOG_LOOKUP.get(label.strip()) or _LOG_LOOKUP.get(label.strip().lower())
    if t is None:
        raise ValueError(f"{label!r} is not a log type (expected one of: {', '.join(t.value for t in LogType)})")
    return t
