"""Loader tests, including the real PAL-Set partial releases in ../shared/data/palset."""

from collections import Counter

from palset.loader import detect_language, load_dataset
from tests.conftest import DEMO, PALSET, require_shared


def test_real_chinese_partial_release_loads_and_joins_on_ids():
    ds = load_dataset(require_shared(PALSET / "data"))
    assert len(ds.users) == 20 and ds.language == "zh"
    assert ds.is_partial and "samples" in ds.missing and ds.errors == []
    user = ds.users["0000"]
    assert user.profile.name == "李晓风" and user.profile.personality.as_dict()["Neuroticism"] == "high"
    assert user.requirement_types["work"]["work-1"] == "提升时间管理能力"
    assert user.preferences["work-1"].preference.pos.startswith("用户偏好")
    assert user.sessions == []


def test_real_english_release_uses_en_suffix_and_keeps_ids():
    ds = load_dataset(require_shared(PALSET / "data_en"))
    assert ds.files["profiles"] == "background/background_en.json"
    assert len(ds.users) == 20 and ds.language == "en"
    user = ds.users["0000"]
    # requirement texts differ between the EN files for about half the ids: the join is by id
    assert set(user.preferences) == {rid for per in user.requirement_types.values() for rid in per}
    genders = Counter(u.profile.gender for u in ds.users.values())
    assert set(genders) <= {"Male", "Female", "Woman"}


def test_filler_release_builds_sessions_topics_and_links(small_release):
    ds = load_dataset(small_release)
    assert ds.errors == [], ds.errors[:3]
    user = ds.users["0000"]
    assert [s.sample_id for s in user.sessions] == [f"0000_sample{i}" for i in range(4)]
    assert [s.split for s in user.sessions] == ["history"] * 3 + ["query"]
    s = user.sessions[1]
    assert all(user.sessions[0].dialogue_timestamp < lg.timestamp <= s.dialogue_timestamp for lg in s.logs)
    topic = s.topics[0]
    sit = user.situations[s.situation_id]
    assert topic.requirement_type_id == sit.requirement_ids[0]
    assert topic.framework.implicit_needs[0].evidences
    assert Counter(c.feedback for c in topic.topic.candidate_solutions) == {"pos": 2, "neg": 2, "neu": 4}


def test_logs_without_type_get_an_inferred_one(small_release, tmp_path):
    from tests.conftest import read, write

    path = small_release / "input.json"
    data = read(path)
    for lg in data["0000"]["history"][0]["logs"]:
        lg.pop("type")
    write(path, data)
    ds = load_dataset(small_release)
    logs = ds.users["0000"].sessions[0].logs
    assert all(lg.type is not None and lg.type_inferred for lg in logs)
    assert not any(lg.type_inferred for lg in ds.users["0000"].sessions[1].logs)


def test_language_detection():
    assert detect_language("用户是一名销售经理，负责公司华东地区的业务拓展。") == "zh"
    assert detect_language("The user is a nurse in Leeds.") == "en"


def test_demo_dataset_meets_the_content_brief():
    ds = load_dataset(DEMO)
    assert ds.errors == [], ds.errors[:5]
    langs = Counter(u.language for u in ds.users.values())
    assert langs["en"] >= 6 and langs["zh"] >= 2
    ages = [u.profile.age for u in ds.users.values()]
    assert min(ages) >= 25 and max(ages) <= 55 and max(ages) - min(ages) >= 20
    assert len({tuple(u.profile.personality.as_dict().values()) for u in ds.users.values()}) == len(ds.users)
    for user in ds.users.values():
        assert all(4 <= len(per) <= 5 for per in user.requirement_types.values()), user.uid
        assert all(p.preference.pos != p.preference.neg for p in user.preferences.values())
        assert len(user.timeline) >= 4
        per_month = Counter(end[:7] for end in user.situations)
        assert all(4 <= n <= 6 for n in per_month.values()), (user.uid, per_month)
        assert len(user.sessions) >= 8 and len(user.query) >= 2
        assert sum(len(s.topics) for s in user.query) >= 5
        for s in user.sessions:
            assert 15 <= len(s.logs) <= 40, s.sample_id
            assert len({lg.type for lg in s.logs}) >= 4, s.sample_id
            assert 1 <= len(s.topics) <= 3
            for t in s.topics:
                assert len(t.topic.implicit_needs) == 2 and len(t.topic.candidate_solutions) == 8
                assert all(len(n.evidences) >= 1 for n in t.framework.implicit_needs)
        rejected = [s for s in user.history if any(t.user.action.value == "Solution Feedback" for t in s.turns)
                    and any(t.topic.solution.neg for t in s.topics)]
        assert rejected, user.uid


def test_lazy_loading_counts_without_parsing_and_reports_problems_on_access(small_release):
    from tests.conftest import read, write

    path = small_release / "input.json"
    data = read(path)
    data["0001"]["query"][0]["logs"][0]["timestamp"] = "yesterday"
    write(path, data)
    eager = load_dataset(small_release)
    lazy = load_dataset(small_release, lazy=True)
    assert not any(u.sessions_loaded for u in lazy.users.values())
    assert lazy.errors == []
    assert lazy.users["0000"].counts == eager.users["0000"].counts
    assert lazy.users["0001"].counts.sessions == 4  # read from the raw file, broken session included
    assert lazy.users["0000"].sessions and lazy.errors == []
    assert len(lazy.users["0001"].sessions) == 3  # the broken session is left out
    assert [str(p) for p in lazy.errors] == [str(p) for p in eager.errors]
    assert any("0001.query[0].logs[0].timestamp" in str(p) for p in lazy.errors)
