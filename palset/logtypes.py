"""Infer a log's type from its wording.

The release drops the generator's ``type`` field, but each type was written with a fixed
sentence pattern (spec §1.8): "the user searched for…", "用户向…发送消息…". The main verb near the
start of the sentence decides the type, so the rule is: find each type's cue words, take the
type whose cue appears *earliest*; a few drift forms (e.g. "用户发送来自领导的消息", which is really a
received message) are recognised first. Device Operation is the generator's fallback type, and
ours.
"""

from __future__ import annotations

import re

from palset.vocab import LogType

# Drift forms that override the earliest-cue rule.
_OVERRIDES: list[tuple[re.Pattern[str], LogType]] = [
    (re.compile(r"来自.{0,20}的(消息|通知|提醒)|收到.{0,20}(消息|通知)"), LogType.MESSAGE_RECEIVING),
    (re.compile(r"\b(received|got) (a |an )?(message|notification|text|email|reminder|alert)", re.I),
     LogType.MESSAGE_RECEIVING),
    (re.compile(r"创建了?(日程|提醒|会议)|添加了?日程|日程[“\"「]"), LogType.SCHEDULE_MANAGEMENT),
    (re.compile(r"商品[：:]|\bitems?: |\b(transferred|sent) (money|\$|£|€)|\bprepaid\b"), LogType.TRANSACTION_RECORD),
    (re.compile(r"\bcreated (the |a )?(schedule|calendar event|event|reminder)", re.I), LogType.SCHEDULE_MANAGEMENT),
]

_CUES: dict[LogType, re.Pattern[str]] = {
    LogType.WEB_SEARCH: re.compile(r"搜索|检索|查找了|百度|\bsearch(ed|es)?\b|\blooked up\b|\bgoogled\b", re.I),
    LogType.CONTENT_PUBLISHING: re.compile(
        r"发布|发表|上传|发了一条|\b(published|posted|uploaded|shared a|wrote a review|left a review)\b", re.I
    ),
    LogType.CONTENT_BROWSING: re.compile(
        r"浏览|观看|阅读|\b(browsed|viewed|watched|read|scrolled)\b", re.I
    ),
    LogType.MESSAGE_SENDING: re.compile(
        r"发送|发消息|回复了|\b(sent|texted|messaged|replied|emailed|wrote to)\b", re.I
    ),
    LogType.MESSAGE_RECEIVING: re.compile(r"接收|收到|\b(received|got a message|was notified)\b", re.I),
    LogType.SCHEDULE_MANAGEMENT: re.compile(
        r"日程|日历|提醒事项|\b(schedule[d]?|calendar|reminder|appointment)\b", re.I
    ),
    LogType.TRANSACTION_RECORD: re.compile(
        r"购买|支付|下单|订购|买了|充值|缴费|付款|\b(bought|purchased|paid|ordered|subscribed|renewed|topped up)\b",
        re.I,
    ),
    LogType.DEVICE_OPERATION: re.compile(
        r"进行了|操作|设置了|打开了|开启了|\b(performed|turned (on|off)|switched|adjusted|set (up|the|a)|"
        r"synced|logged|recorded|started|unlocked|enabled|disabled|opened)\b",
        re.I,
    ),
}
# On equal positions, the more specific type wins.
_PRIORITY = [
    LogType.MESSAGE_RECEIVING,
    LogType.SCHEDULE_MANAGEMENT,
    LogType.TRANSACTION_RECORD,
    LogType.CONTENT_PUBLISHING,
    LogType.MESSAGE_SENDING,
    LogType.WEB_SEARCH,
    LogType.CONTENT_BROWSING,
    LogType.DEVICE_OPERATION,
]


def infer_log_type(content: str) -> LogType:
    """Best guess of the type of a log written in PAL-Set's patterns (Chinese or English)."""
    head = content[:80]
    for pattern, log_type in _OVERRIDES:
        m = pattern.search(head)
        if m and (m.start() < 30 or log_type is LogType.TRANSACTION_RECORD):
            return log_type
    best: tuple[int, int, LogType] | None = None
    for rank, log_type in enumerate(_PRIORITY):
        m = _CUES[log_type].search(content)
        if m:
            key = (m.start(), rank, log_type)
            if best is None or key[:2] < best[:2]:
                best = key
    return best[2] if best else LogType.DEVICE_OPERATION
