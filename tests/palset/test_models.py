from datetime import datetime

import pytest
from pydantic import TypeAdapter, ValidationError

from palset.models import Log, Profile, Sample, sample_index, topic_number
from palset.vocab import Act, LogType, parse_act, parse_log_type


def test_acts_parse_in_every_spelling():
    assert parse_act("话题询问") is Act.TOPIC_INQUIRY
    assert parse_act("<需求推测>") is Act.REQUIREMENT_PREDICTION
    assert parse_act("solution proposal") is Act.SOLUTION_PROPOSAL
    assert parse_act("Need Inference") is Act.REQUIREMENT_PREDICTION
    assert Act.FEEDBACK_RESPONSE.zh == "反馈回应"
    with pytest.raises(ValueError, match="not a dialogue act"):
        parse_act("闲聊")


def test_log_types_parse_zh_and_en():
    assert parse_log_type("网页搜索") is LogType.WEB_SEARCH
    assert parse_log_type("device operation") is LogType.DEVICE_OPERATION
    with pytest.raises(ValueError, match="not a log type"):
        parse_log_type("Phone Call")


def test_log_timestamp_minute_precision_and_clear_error():
    log = Log.model_validate({"timestamp": "2024-05-20 08:15", "content": "x"})
    assert log.timestamp == datetime(2024, 5, 20, 8, 15)
    assert log.model_dump(exclude_defaults=True)["timestamp"] == "2024-05-20 08:15"
    with pytest.raises(ValidationError) as e:
        Log.model_validate({"timestamp": "2024-13-01 9:00", "content": "x"})
    assert '"2024-13-01 9:00" is not YYYY-MM-DD HH:MM' in str(e.value)


def test_profile_uses_release_keys_and_rejects_unknown_fields():
    raw = {"name": "A", "gender": "Female", "age": 30, "occupation": "o", "health status": "h",
           "family members": "f", "hobbies": "x",
           "personality": {"Openness": "high", "Conscientiousness": "low", "Extraversion": "medium",
                           "Agreeableness": "low", "Neuroticism": "high"}}
    p = Profile.model_validate(raw)
    assert p.health_status == "h" and p.personality.as_dict()["Openness"] == "high"
    with pytest.raises(ValidationError):
        Profile.model_validate({**raw, "hobby": "typo"})
    with pytest.raises(ValidationError):
        Profile.model_validate({**raw, "personality": {**raw["personality"], "Openness": "very high"}})


def test_sample_requires_contiguous_turn_and_topic_keys():
    base = {"sample_id": "0000_sample3", "dialogue_timestamp": "2024-05-26 17:00:00", "logs": [],
            "dialogue": {"turn_1": {"user": {"action": "话题询问", "content": "a"},
                                    "assistant": {"action": "需求推测", "content": "b"}}},
            "topics": {}}
    assert TypeAdapter(Sample).validate_python(base).sample_id == "0000_sample3"
    bad = {**base, "dialogue": {"turn_2": base["dialogue"]["turn_1"]}}
    with pytest.raises(ValidationError, match="turn ids must be turn_1"):
        TypeAdapter(Sample).validate_python(bad)
    with pytest.raises(ValidationError, match="not a sample id"):
        TypeAdapter(Sample).validate_python({**base, "sample_id": "sample3"})


def test_id_helpers():
    assert sample_index("0012_sample30") == 30
    assert topic_number("topic-2") == 2
