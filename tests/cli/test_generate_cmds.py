"""``pal generate`` with the schema-driven fake: users added to a folder that passes ``pal validate``,
progress on stderr, re-running the same command resumes (finished users untouched), ``--resume``."""

from __future__ import annotations

import json

import pytest

from cli import generate_cmds
from cli.main import main
from palset.loader import load_dataset
from tests.synth.fakes import SchemaLLM, make_llm


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    fake = SchemaLLM()
    monkeypatch.setattr(generate_cmds, "_client", lambda: make_llm(tmp_path / "pal", fake))
    from synth import config

    small = dict(situations_min=2, situations_max=2, min_logs=3, max_logs=4, retries=1)
    original = generate_cmds._config
    monkeypatch.setattr(generate_cmds, "_config", lambda args: original(args).model_copy(update=small))
    assert config.SynthConfig  # the real config class is used
    return fake


def test_generate_two_users_then_resume_is_a_no_op(fake, tmp_path, capsys):
    out = tmp_path / "ds"
    args = ["generate", "--out", str(out), "--users", "2", "--months", "1", "--lang", "en", "--concurrency", "2",
            "--seed", "5"]
    assert main(args) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert sorted(u["uid"] for u in summary["users"]) == ["0000", "0001"]
    assert "13/13 assemble: done" in captured.err and "logs 2024-12-" in captured.err
    ds = load_dataset(out)
    assert set(ds.users) == {"0000", "0001"} and not ds.errors
    assert main(["validate", str(out), "--quiet"]) == 0
    n = len(fake.requests)
    assert main(args) == 0  # same command: both finished, nothing is asked again
    assert len(fake.requests) == n
    capsys.readouterr()


def test_an_interrupted_generate_continues_where_it_stopped(fake, tmp_path, capsys):
    out = tmp_path / "ds"
    fake.fail_at["TopicDialogueReply"] = 1
    args = ["generate", "--out", str(out), "--users", "1", "--months", "1", "--describe", "a bus driver"]
    assert main(args) == 1
    assert "failed" in capsys.readouterr().err
    profiles = fake.names().count("ProfileReply")
    assert main(["generate", "--out", str(out), "--resume"]) == 0
    assert fake.names().count("ProfileReply") == profiles  # nothing before the failure was redone
    assert list(load_dataset(out).users) == ["0000"]
    assert main(["generate", "--out", str(out), "--resume"]) == 0
    assert "nothing to resume" in capsys.readouterr().err


def test_a_failed_generate_is_asked_afresh_from_a_step(fake, tmp_path, capsys):
    """``--rerun-from``: the failed run's step and those after it are asked again (new samples), the steps before
    it are kept, as the Generate page's re-run does."""
    out = tmp_path / "ds"
    fake.fail_at["TopicDialogueReply"] = 1
    assert main(["generate", "--out", str(out), "--users", "1", "--months", "1"]) == 1
    capsys.readouterr()
    before = {n: fake.names().count(n) for n in ("ProfileReply", "CandidatesReply")}
    assert main(["generate", "--out", str(out), "--resume", "--rerun-from", "candidate_solutions"]) == 0
    err = capsys.readouterr().err
    assert "asking afresh from candidate_solutions (dropped: candidate_solutions, solution_preference" in err
    assert fake.names().count("ProfileReply") == before["ProfileReply"]  # upstream kept
    assert fake.names().count("CandidatesReply") > before["CandidatesReply"]  # asked again
    assert list(load_dataset(out).users) == ["0000"]
    assert main(["generate", "--out", str(out), "--rerun-from", "logs"]) == 2  # only with --resume
    assert main(["generate", "--out", str(out), "--resume", "--rerun-from", "nonsense"]) == 2
    assert "one of the steps: profile" in capsys.readouterr().err


def test_bad_arguments_are_errors(fake, tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path / "x"), "--months", "13"]) == 2
    assert "months" in capsys.readouterr().err
    assert main(["generate", "--out", str(tmp_path / "x"), "--users", "0"]) == 2
