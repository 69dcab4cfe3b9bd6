"""One test per class of bad input: each yields `<file>: <json path>: <message>` problems, never an exception."""

import pytest

from palset.loader import load_dataset
from tests.conftest import read, write


def problems(root):
    return [str(p) for p in load_dataset(root).errors]


def test_valid_release_has_no_errors(small_release):
    assert problems(small_release) == []


def test_wrong_types(small_release):
    path = small_release / "input.json"
    data = read(path)
    data["0001"]["history"][1]["logs"][2]["timestamp"] = "2024-13-01 9:00"
    data["0001"]["history"][0]["logs"] = "none"
    write(path, data)
    out = problems(small_release)
    assert 'input.json: 0001.history[1].logs[2].timestamp: "2024-13-01 9:00" is not YYYY-MM-DD HH:MM' in out
    assert any(p.startswith("input.json: 0001.history[0].logs: ") for p in out)


def test_missing_folder_and_missing_files(tmp_path):
    assert any("is not a folder" in p for p in problems(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    assert any("no PAL-Set files found" in p for p in problems(tmp_path / "empty"))


def test_missing_file_is_a_partial_release_not_an_error(small_release):
    (small_release / "situation" / "situation.json").unlink()
    ds = load_dataset(small_release)
    assert "situations" in ds.missing and ds.errors == []
    assert ds.users["0000"].sessions[0].topics[0].requirement_type_id is None


def test_broken_json(small_release):
    (small_release / "preference" / "preference.json").write_text('{"0000": {"work": ', encoding="utf-8")
    out = problems(small_release)
    assert any(p.startswith("preference/preference.json: (top level): invalid JSON: ") and "line 1" in p for p in out)
    assert len(load_dataset(small_release).users) == 2  # the rest still loads


def test_wrong_encoding(small_release):
    path = small_release / "background" / "background.json"
    path.write_bytes(path.read_text(encoding="utf-8").replace("Filler", "Fillér").encode("latin-1"))
    assert any("not valid UTF-8" in p and p.startswith("background/background.json") for p in problems(small_release))


def test_empty_file(small_release):
    (small_release / "timeline" / "timeline.json").write_text("  \n", encoding="utf-8")
    assert "timeline/timeline.json: (top level): file is empty" in problems(small_release)


def test_unknown_act_label(small_release):
    path = small_release / "input.json"
    data = read(path)
    data["0000"]["query"][0]["dialogue"]["turn_2"]["user"]["action"] = "闲聊"
    write(path, data)
    out = problems(small_release)
    assert any(p.startswith("input.json: 0000.query[0].dialogue.turn_2.user.action: '闲聊' is not a dialogue act")
               for p in out)


def test_act_played_by_the_wrong_role(small_release):
    path = small_release / "input.json"
    data = read(path)
    data["0000"]["history"][0]["dialogue"]["turn_1"]["user"]["action"] = "方案提议"
    write(path, data)
    assert any("turn_1.user.action: 'Solution Proposal' is not a user act" in p for p in problems(small_release))


def test_logs_after_the_dialogue_time(small_release):
    path = small_release / "input.json"
    data = read(path)
    s = data["0001"]["history"][2]
    s["logs"][-1]["timestamp"] = "2025-06-01 10:00"
    write(path, data)
    assert any(p.startswith("input.json: 0001.history[2].logs[9].timestamp: log at 2025-06-01 10:00 is after the dialogue time")
               for p in problems(small_release))


def test_duplicate_ids(small_release):
    path = small_release / "input.json"
    data = read(path)
    data["0000"]["history"][1]["sample_id"] = "0000_sample0"
    write(path, data)
    assert any('0000.history[1].sample_id: duplicate id "0000_sample0" (also at 0000.history[0])' in p
               for p in problems(small_release))


def test_dangling_requirement_ids(small_release):
    path = small_release / "situation" / "situation.json"
    data = read(path)
    end = next(iter(data["0000"]))
    data["0000"][end]["requirement_ids"][0] = "work-9"
    write(path, data)
    pref_path = small_release / "preference" / "preference.json"
    prefs = read(pref_path)
    prefs["0001"]["health"]["health-7"] = prefs["0001"]["health"]["health-1"]
    write(pref_path, prefs)
    out = problems(small_release)
    assert f"situation/situation.json: 0000.{end}.requirement_ids[0]: dangling requirement id 'work-9'" in out
    assert any(p.startswith("preference/preference.json: 0001.health.health-7: dangling requirement id") for p in out)


def test_candidate_labels_break_the_two_pos_two_neg_rule(small_release):
    path = small_release / "input.json"
    data = read(path)
    cands = data["0000"]["history"][0]["topics"]["topic-1"]["candidate_solutions"]
    for c in cands:
        if c["feedback"] == "neu":
            c["feedback"] = "pos"
            break
    write(path, data)
    assert any("topics.topic-1.candidate_solutions: expected exactly 2 pos and 2 neg candidates, found 3 pos" in p
               for p in problems(small_release))


def test_a_liked_solution_must_be_a_candidate_labelled_pos(small_release):
    path = small_release / "input.json"
    data = read(path)
    topic = data["0000"]["history"][0]["topics"]["topic-1"]
    pos = topic["solution"]["pos"][0]
    neu = next(c for c in topic["candidate_solutions"] if c["feedback"] == "neu")
    neu["solution"] = pos  # a repeated text labelled neu: fine, the pos-labelled one still exists
    write(path, data)
    assert problems(small_release) == []
    next(c for c in topic["candidate_solutions"] if c["feedback"] == "pos" and c["solution"] == pos)["solution"] = "x"
    write(path, data)
    assert any(p.endswith("topics.topic-1.solution.pos[0]: is not a candidate labelled pos") for p in problems(small_release))


@pytest.mark.parametrize("payload", ["[1, 2]", '"text"', "42", '{"0000": 5}'])
def test_wrong_top_level_shapes_never_raise(small_release, payload):
    (small_release / "input.json").write_text(payload, encoding="utf-8")
    out = problems(small_release)
    assert out and all(p.startswith("input.json: ") for p in out)
