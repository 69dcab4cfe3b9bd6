"""Log-type inference against labelled logs: PAL-Set's real generator output and the demo users."""

import pytest

from palset.loader import load_dataset
from palset.logtypes import infer_log_type
from palset.vocab import LogType, parse_log_type
from tests.conftest import DEMO, PALSET, read, require_shared


def test_real_palset_generator_logs_all_typed_correctly():
    examples = read(require_shared(PALSET / "examples.json"))
    logs = examples["synthesis"]["logs_user0000_2024-04-06_to_04-12"]["output"]
    assert len(logs) >= 20
    wrong = [lg["content"] for lg in logs if infer_log_type(lg["content"]) is not parse_log_type(lg["type"])]
    assert wrong == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_demo_logs_typed_at_least_95_percent(lang):
    ds = load_dataset(DEMO)
    logs = [lg for u in ds.users.values() if u.language == lang for s in u.sessions for lg in s.logs]
    assert len(logs) > 100
    hits = sum(infer_log_type(lg.content) is lg.type for lg in logs)
    assert hits / len(logs) >= 0.95


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("用户发送来自直属领导的消息：“明天开会”", LogType.MESSAGE_RECEIVING),  # drift seen in PAL-Set
        ("用户在智能手机上进行了行程查询操作：通过高铁购票APP确认了车次。", LogType.DEVICE_OPERATION),
        ('The user searched for "iron rich foods" on Google and viewed an NHS page.', LogType.WEB_SEARCH),
        ('The user created the schedule "Gym" in Google Calendar, time 18:00-19:00.', LogType.SCHEDULE_MANAGEMENT),
        ("The user bought trainers via Amazon, item: Nike Pegasus 41, size 9.", LogType.TRANSACTION_RECORD),
        ("用户通过携程预订了酒店，商品：家庭房1晚，价格428元。", LogType.TRANSACTION_RECORD),
        ("The user received a message from Mum: \"Call me?\"", LogType.MESSAGE_RECEIVING),
        ("something the generator never wrote", LogType.DEVICE_OPERATION),
    ],
)
def test_cues_and_drift(content, expected):
    assert infer_log_type(content) is expected
