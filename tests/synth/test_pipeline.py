"""The synthesis pipeline with the schema-driven fake: a full run that passes `pal validate`, resume after an
interruption without redoing finished calls, edit-and-rerun that invalidates exactly the downstream steps,
cancel, and merging into an existing release without id collisions."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from palset.loader import load_dataset
from synth.registry import NAMES, downstream
from tests.conftest import DEMO
from tests.synth.conftest import small_config
from tests.synth.fakes import SchemaLLM


def errors_of(path) -> list[str]:
    return [str(p) for p in load_dataset(path).problems if p.level == "error"]


def test_a_full_run_assembles_a_valid_user(make_pipeline, tmp_path, fake):
    pipe = make_pipeline()
    info = pipe.run()
    assert info.status == "finished" and info.uid == "0000" and pipe.pending() == []
    ds = load_dataset(tmp_path / "ds")
    assert errors_of(tmp_path / "ds") == [] and list(ds.users) == ["0000"]
    user = ds.users["0000"]
    choice = pipe.output("dialogue_choice")
    assert len(user.sessions) == len(choice.history) + len(choice.query) >= 1
    assert [s.split for s in user.sessions][-len(choice.query):] == ["query"] * len(choice.query)
    assert all(s.logs for s in user.sessions) and all(len(t.topic.candidate_solutions) == 8 for s in user.sessions for t in s.topics)
    assert (tmp_path / "ds" / "background" / "background_en.json").is_file()  # English release naming
    report = pipe.output("assemble").report
    assert report.months == 2 and report.logs == sum(len(v) for v in pipe.output("logs").situations.values())
    assert report.candidates_pos == report.candidates_neg == 2 * report.topics
    assert set(report.retries) == set(NAMES[:-1])
    assert len(report.log_types) == 8
    cost = pipe.cost()
    assert cost.calls == len(fake.requests) > 20  # every call tagged with the run id


def test_every_random_choice_follows_the_seed(make_pipeline, home, tmp_path):
    a = make_pipeline(run_id="a", out=tmp_path / "a")
    a.run(until="dialogue_choice")
    b = make_pipeline(run_id="b", out=tmp_path / "b")
    b.run(until="dialogue_choice")
    c = make_pipeline(config=small_config(seed=8), run_id="c", out=tmp_path / "c")
    c.run(until="dialogue_choice")
    spans = [[s.time_span for s in p.output("situations").situations] for p in (a, b, c)]
    assert spans[0] == spans[1] and spans[0] != spans[2]
    assert a.output("dialogue_choice") == b.output("dialogue_choice")
    assert a.info.config.seed == 7  # recorded


def test_the_seed_also_seeds_sampling_and_a_rerun_samples_afresh(make_pipeline, fake, tmp_path):
    a = make_pipeline(run_id="a", out=tmp_path / "a")
    a.run(until="profile")
    b = make_pipeline(run_id="b", out=tmp_path / "b")
    b.run(until="profile")
    first, second = (r.seed for r in fake.requests[-2:])
    assert first == second is not None  # same run seed, step and unit: the same sampling seed
    a.invalidate("profile")
    a.run(until="profile")
    assert len(fake.requests) == 3 and fake.requests[-1].seed not in (None, first)  # a re-run samples afresh


def test_an_interrupted_run_resumes_without_redoing_finished_calls(make_pipeline, fake):
    fake.fail_at["SituationLogsReply"] = 3  # the endpoint fails on the 3rd logs call
    pipe = make_pipeline()
    info = pipe.run()
    assert info.status == "failed" and "scripted failure" in info.error
    assert "logs" in pipe.pending() and pipe.record("dialogues") is None
    before = len(fake.requests)
    assert fake.names().count("SituationLogsReply") == 3
    info = make_pipeline().run()  # a new process would do the same: same run id, same store
    assert info.status == "finished"
    again = fake.names()[before:]
    assert again.count("SituationLogsReply") == len(pipe.output("situations").situations) - 2  # 2 were kept
    assert "ProfileReply" not in again and "TimelineReply" not in again


def test_editing_a_step_invalidates_exactly_its_downstream_steps(make_pipeline, fake):
    pipe = make_pipeline()
    assert pipe.run().status == "finished"
    cands = pipe.record("candidate_solutions").output
    first = next(iter(cands["situations"]))
    cands["situations"][first][0][0] = "Book a 20-minute walk with a colleague after lunch."
    assert pipe.edit("candidate_solutions", cands) == []
    assert set(pipe.pending()) == {"solution_preference", "dialogues", "assemble"} == set(downstream("candidate_solutions"))
    rec = pipe.record("candidate_solutions")
    assert rec.edited and rec.output["situations"][first][0][0].startswith("Book a 20-minute walk")
    before = len(fake.requests)
    assert pipe.run().status == "finished"
    rerun = set(fake.names()[before:])
    assert rerun == {"SolutionPreferenceReply", "TopicDialogueReply"}


def test_editing_logs_only_invalidates_assembly(make_pipeline):
    pipe = make_pipeline()
    pipe.run()
    assert pipe.invalidate("logs", include_self=False) == ["assemble"]
    assert pipe.pending() == ["assemble"]


def test_an_invalid_edit_is_refused_naming_the_field(make_pipeline):
    pipe = make_pipeline()
    pipe.run(until="situations")
    bad = pipe.record("situations").output
    bad["situations"][0]["requirement_ids"] = ["work-1", "work-1"]
    problems = pipe.edit("situations", bad)
    assert problems == ["situations[0].requirement_ids: ids repeat (work-1, work-1); give distinct ids"]
    bad["situations"][0]["start_hour"] = 3
    assert any(p.startswith("situations.0.start_hour:") for p in pipe.edit("situations", bad))
    assert pipe.edit("situations", "{not json") [0].startswith("not valid JSON")
    profile = pipe.record("profile").output
    profile["personality"]["Openness"] = "very"
    assert any("personality.Openness" in p for p in pipe.edit("profile", profile))
    assert pipe.pending()[0] == "experience"  # nothing was dropped by refused edits


def test_rerun_from_a_step_regenerates_it_and_downstream(make_pipeline, fake):
    pipe = make_pipeline()
    pipe.run()
    before = len(fake.requests)
    assert pipe.rerun_from("dialogues").status == "finished"
    assert set(fake.names()[before:]) == {"TopicDialogueReply"}


def test_cancel_stops_between_calls_and_keeps_the_work(make_pipeline, fake):
    cancel = threading.Event()

    def stop_after_timeline(step, event, record):
        if step == "timeline" and event == "done":
            cancel.set()

    pipe = make_pipeline(cancel=cancel, on_step=stop_after_timeline)
    info = pipe.run()
    assert info.status == "cancelled" and pipe.pending()[0] == "requirement_types"
    assert fake.names() == ["ProfileReply", "TimelineReply"]


def test_a_user_added_to_an_existing_release_gets_a_new_id(make_pipeline, tmp_path):
    ds = tmp_path / "demo"
    shutil.copytree(DEMO, ds)
    before = set(load_dataset(ds).users)
    pipe = make_pipeline(out=ds)
    info = pipe.run()
    assert info.status == "finished" and info.uid not in before
    after = load_dataset(ds)
    assert set(after.users) == before | {info.uid} and errors_of(ds) == []
    profiles = json.loads((ds / "background" / "background.json").read_text())
    assert info.uid in profiles  # merged into the folder's own file naming


def test_two_users_in_one_folder_do_not_collide(make_pipeline, tmp_path):
    a = make_pipeline(run_id="a").run()
    b = make_pipeline(config=small_config(seed=3), run_id="b").run()
    assert (a.uid, b.uid) == ("0000", "0001")
    assert set(load_dataset(tmp_path / "ds").users) == {"0000", "0001"}
    # re-assembling a run replaces its own user instead of adding one
    pipe = make_pipeline(run_id="a")
    pipe.rerun_from("assemble")
    assert set(load_dataset(tmp_path / "ds").users) == {"0000", "0001"}


def test_a_chinese_user_uses_chinese_labels_and_month_keys(make_pipeline, tmp_path, home):
    pipe = make_pipeline(config=small_config(lang="zh", months=1), llm_fake=SchemaLLM())
    assert pipe.run().status == "finished"
    assert list(pipe.output("timeline").months) == ["2024年12月"]
    types = {lg.type for per in pipe.output("logs").situations.values() for lg in per}
    assert types <= {"网页搜索", "内容发布", "内容浏览", "消息发送", "消息接收", "日程管理", "交易记录", "设备操作"}
    assert (tmp_path / "ds" / "input.json").is_file() and errors_of(tmp_path / "ds") == []


def test_a_crash_during_assembly_does_not_make_a_second_user_on_resume(make_pipeline, tmp_path, monkeypatch):
    """Audit finding 9: killed while writing the release, a resumed generation took the next user id (the half-added
    one was taken) and never cleaned the first. The run's id is now kept before anything is written."""
    import synth.steps.assemble as assemble

    real, crashed = assemble.write_release, []

    def crash(root, bundles, suffix=""):
        files = real(root, bundles, suffix)
        if Path(root) != tmp_path / "ds":  # the scratch check of the user alone
            return files
        crashed.append([b.uid for b in bundles])  # the files are written; the process dies before the step is done
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(assemble, "write_release", crash)
    pipe = make_pipeline(run_id="a")
    with pytest.raises(KeyboardInterrupt):
        pipe.run()
    assert crashed == [["0000"]] and list(load_dataset(tmp_path / "ds").users) == ["0000"]
    monkeypatch.setattr(assemble, "write_release", real)
    info = make_pipeline(run_id="a").run()  # resumed
    assert info.status == "finished" and info.uid == "0000"
    assert list(load_dataset(tmp_path / "ds").users) == ["0000"] and errors_of(tmp_path / "ds") == []


def _request_only(req) -> str:
    """A valid answer that depends on the request alone (not on which call came first), except that every solution
    preference names one candidate twice (re-asked, then repaired: retries, errors and fixes in the records)."""
    from testkit.schema_fill import schema_answer

    fmt = req.response_format["json_schema"]
    value = schema_answer(fmt["name"], fmt["schema"], req.messages[1].content)
    if fmt["name"] == "SolutionPreferenceReply":
        for choice in value["pos_list"] + value["neg_list"]:
            choice["candidate"] = "S1"
    return json.dumps(value, ensure_ascii=False)


def _made(pipe) -> tuple[dict, dict]:
    """Every step's record (but its timings) and every stored call, by step and unit."""
    root = pipe.store._dir(pipe.run_id) / "units"
    units = {str(p.relative_to(root)): json.loads(p.read_text()) for p in sorted(root.rglob("*.json"))}
    return {n: r.model_dump(exclude={"seconds", "finished_at"}) for n, r in pipe.records().items()}, units


def test_steps_and_calls_in_flight_together_make_exactly_what_one_by_one_makes(make_pipeline, tmp_path):
    from backends.llm.fake import ScriptedLLM

    one_by_one = make_pipeline(run_id="seq", out=tmp_path / "a", llm_fake=ScriptedLLM(_request_only))
    assert one_by_one.run(until="dialogues").status == "new"
    fake = ScriptedLLM(_request_only, slots=4, latency=0.1)
    together = make_pipeline(run_id="par", out=tmp_path / "b", llm_fake=fake)
    assert together.run(until="dialogues").status == "new"
    assert fake.max_in_flight == 4  # per-situation calls (and independent steps) went out together
    steps_a, units_a = _made(one_by_one)
    steps_b, units_b = _made(together)
    assert steps_b == steps_a and units_b == units_a
    assert steps_b["solution_preference"]["fixes"] and steps_b["solution_preference"]["errors"]


def test_a_concurrent_step_that_fails_keeps_its_finished_calls_for_the_resume(make_pipeline, tmp_path):
    from backends.llm.errors import BadRequest
    from backends.llm.fake import ScriptedLLM

    failing = {"on": True}

    def reply(req):
        if failing["on"] and req.response_format["json_schema"]["name"] == "ExperienceReply" and "2024-12-1" in \
                req.messages[1].content:
            raise BadRequest("scripted failure")
        return _request_only(req)

    fake = ScriptedLLM(reply, slots=3, latency=0.01)
    pipe = make_pipeline(run_id="fail", out=tmp_path / "a", llm_fake=fake)
    info = pipe.run(until="experience")
    assert info.status == "failed" and "scripted failure" in (info.error or "")
    kept = len(list((pipe.store._dir("fail") / "units" / "experience").glob("*.json")))
    assert kept >= 1  # the situations answered before (or beside) the failure are stored
    failing["on"] = False
    sent = len(fake.requests)
    assert pipe.run(until="experience").status == "new"
    asked_again = [r for r in fake.requests[sent:] if r.response_format["json_schema"]["name"] == "ExperienceReply"]
    assert len(asked_again) == len(pipe.output("situations").situations) - kept
