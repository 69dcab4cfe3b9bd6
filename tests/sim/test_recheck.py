"""Stored runs read again under the current rules (``sim/recheck.py``, ``pal runs check``): the turns the simulator
would ask again today, with the same functions it uses; a turn that is not the model's draft is left alone.

The turns below are what the 1.5B recorded for the demo workspace (data/demo users, CC BY-NC: see licenses/)."""

from __future__ import annotations

import json

from palset.dataset import dataset_key
from palset.vocab import Act
from sim.persona_check import GIVES_AWAY
from sim.recheck import check_run, reason_counts
from sim.rulebook import rulebook_version
from sim.types import RunRecord, RunSpec, Utterance
from tests.conftest import DEMO

TURNS = [
    ("user", Act.TOPIC_INQUIRY, "What do I do now that I didn't get staff?", ""),
    ("assistant", Act.REQUIREMENT_PREDICTION, "Based on the information provided, the user seems to want a plan.", ""),
    ("user", Act.REQUIREMENT_CONFIRMATION, "I need to turn the committee's feedback into a concrete plan for the next "
                                           "cycle.", ""),
    ("assistant", Act.REQUIREMENT_PREDICTION, "Do you want the feedback turned into a dated plan for Q2?", ""),
    ("user", Act.REQUIREMENT_CONFIRMATION, "I need to turn the committee's feedback into a concrete plan for the next "
                                           "cycle, yes.", ""),
    ("assistant", Act.SOLUTION_PROPOSAL, "Certainly! Here's how you could do it:", ""),
    ("user", Act.SOLUTION_FEEDBACK, "No, that's not for me.", "composed from the model's decision (…)"),
    ("assistant", Act.FEEDBACK_RESPONSE, "Understood, thank you.", ""),
]


def _record(turns=TURNS, user="1002") -> RunRecord:
    spec = RunSpec(dataset=dataset_key(DEMO), user_id=user, sample_id=f"{user}_sample7", topic_key="topic-1",
                   method="gold")
    return RunRecord(run_id="run-x", spec=spec, utterances=[
        Utterance(turn_no=i // 2 + 1, side=side, actor="simulator" if side == "user" else "assistant", act=act,
                  content=text, fallback=fallback) for i, (side, act, text, fallback) in enumerate(turns)])


def test_the_turns_the_current_rules_would_ask_again_and_why(demo_dataset):
    check = check_run(_record(), demo_dataset.users["1002"])
    found = {(s.turn_no, s.side): s.reasons for s in check.slips}
    assert found == {(1, "assistant"): ["talks about the user or the prompt's terms"],
                     (2, "user"): [GIVES_AWAY],  # user 1002's requirement, nearly word for word
                     (3, "user"): ["repeats an earlier message of its own (word for word or nearly)", GIVES_AWAY],
                     (3, "assistant"): ["announces what its first paragraph does not hold"]}
    assert (check.task_id, check.turns) == ("1002_sample7_topic-1", 8)  # the composed verdict is not checked
    assert reason_counts([check, check])["talks about the user or the prompt's terms"] == 2
    rules = {(s.turn_no, s.side): s.rules for s in check.slips}  # a user turn's reasons name their turn rules
    assert rules[(3, "user")] == ["turn.repeat", "turn.gives_away"] and rules[(1, "assistant")] == []
    assert check.rulebook == rulebook_version()


def test_a_run_that_keeps_to_the_rules_passes_and_chinese_turns_are_read_as_chinese(demo_dataset):
    turns = [("user", Act.TOPIC_INQUIRY, "我想问问关于年终绩效的事情。", ""),
             ("assistant", Act.REQUIREMENT_PREDICTION, "你是想给刘梅一个有数据支撑的评级吗？", ""),
             ("user", Act.REQUIREMENT_CONFIRMATION, "对，我确实需要在强制分布下给她一个有理有据的评级。", ""),
             ("assistant", Act.SOLUTION_PROPOSAL, "我建议你先和刘梅单独谈一次，把评分标准摊开讲。", "")]
    assert check_run(_record(turns, "1006"), demo_dataset.users["1006"]).slips == []
    english = check_run(_record(turns, "1002"), demo_dataset.users["1002"])  # the same turns from an English user
    assert any("not in the user's language" in r for s in english.slips for r in s.reasons)


def test_pal_runs_check_lists_the_turns_and_prints_the_ids_to_record_anew(tmp_path, monkeypatch, capsys):
    from cli import context
    from cli.main import main
    from testkit.workspace import make_workspace

    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    ws = make_workspace(tmp_path / "pal", env={"PAL_EMBEDDER": "hash"})
    record = _record()
    ws.sims.create(RunRecord(run_id=record.run_id, spec=record.spec))
    for u in record.utterances:
        ws.sims.add_utterance(record.run_id, u)
    context._open.cache_clear()
    try:
        assert main(["runs", "check", "--dataset", str(DEMO)]) == 0
        out, err = capsys.readouterr()
        assert "run-x (1002_sample7_topic-1, " in out and "turn 3 assistant: announces what" in out
        assert "1 of 1 run(s) hold turns" in err
        assert main(["runs", "check", "--dataset", str(DEMO), "--ids"]) == 0
        assert capsys.readouterr().out.strip() == "run-x"
        assert main(["runs", "check", "--dataset", str(DEMO), "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        assert row["run_id"] == "run-x" and len(row["slips"]) == 4
        assert main(["runs", "check", "--dataset", str(DEMO), "--user", "1000"]) == 0  # another user: nothing
        assert "0 of 0 run(s)" in capsys.readouterr().err
    finally:
        context._open.cache_clear()


def test_a_turn_that_gives_the_need_away_is_named_and_one_that_says_the_query_is_not(demo_dataset):
    """User 1006's gold run at seed 2 opened with the requirement word for word (user 1007 denied guesses with it);
    "Nine galleries? Help?" shares words with user 1004's need but says the user query ("Nine galleries before
    Christmas. Help?") and passes."""
    user = demo_dataset.users["1006"]
    need = "我需要在强制分布的要求下给刘梅一个有数据支撑的评级，并通过合适的沟通方式让刘梅接受结果、继续稳住温江店。"  # as recorded
    gave = check_run(_record([("user", Act.TOPIC_INQUIRY, need, "")], "1006"), user)
    assert [s.reasons for s in gave.slips] == [[GIVES_AWAY]]
    asked = check_run(_record([("user", Act.TOPIC_INQUIRY, "年终要给店长打低分，这话怎么开口？", "")], "1006"), user)
    assert asked.slips == []
    later = [("user", Act.TOPIC_INQUIRY, "年终要给店长打低分，这话怎么开口？", ""),
             ("assistant", Act.REQUIREMENT_PREDICTION, "你是想给刘梅一个有数据支撑的评级吗？", ""),
             ("user", Act.REQUIREMENT_CONFIRMATION, need, "")]  # a later turn in the need's words gives it away too
    assert [(s.turn_no, s.reasons) for s in check_run(_record(later, "1006"), user).slips] == [(2, [GIVES_AWAY])]
    galleries = check_run(_record([("user", Act.TOPIC_INQUIRY, "Nine galleries? Help?", "")], "1004"),
                          demo_dataset.users["1004"])
    assert galleries.slips == []
