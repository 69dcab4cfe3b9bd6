"""The composition root: every store from one home, one builder policy, run-scoped accounting, logging."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from palset.loader import load_dataset
from sim.service import make_spec
from studio.workspace import Workspace
from testkit.h2_fake import h2_reply
from testkit.release import make_release
from testkit.requests import schema_name
from testkit.workspace import make_workspace
from tests.sim.conftest import default_reply


def reply(req) -> str:
    """H²Memory's structured steps get H²Memory answers; the simulation's turns get the simulation's."""
    name = schema_name(req)
    return h2_reply(req) if name and name not in ("UserTurn", "FreeUserTurn") else default_reply(req)


@pytest.fixture
def filler(tmp_path):
    return load_dataset(make_release(tmp_path / "ds", users=2, sessions=3, logs_per_session=8, turns=6,
                                     query_sessions=1))


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path / "pal", dict.fromkeys(ROLES, ScriptedLLM(reply)), env={"PAL_EMBEDDER": "hash"})


def test_two_builders_and_a_simulation_in_one_session_record_under_their_own_run_ids(ws, filler):
    llm = ws.llm(session_id="one-browser-session")
    u1, u2 = sorted(filler.users)
    b1 = ws.open_builder(filler, u1, "h2memory", llm=llm)
    b2 = ws.open_builder(filler, u2, "h2memory", llm=llm)
    b1.run(until_session=0)
    b2.run(until_session=0)
    query = filler.users[u2].query[0]
    sim = ws.open_simulation(filler, make_spec(filler, u2, query.sample_id, query.topics[0].key, "vanilla-log"), llm)
    assert sim.run().status == "finished"
    b1.run()  # the first builder carries on after the simulation, through the same session client
    rows = ws.runs.calls("one-browser-session", limit=100_000)
    by_run = Counter(r["run_id"] for r in rows)
    assert set(by_run) == {b1.build_id, b2.build_id, sim.record.run_id}
    assert by_run[b1.build_id] == ws.memory.info(b1.build_id).llm_calls > 0  # per-stage costs add up exactly
    assert by_run[b2.build_id] == ws.memory.info(b2.build_id).llm_calls > 0
    assert by_run[sim.record.run_id] >= len(sim.record.utterances) > 0
    assert llm.run_id is None  # the session's client itself was never re-pointed


def test_one_builder_policy_reopens_the_stored_build_with_its_embedder(ws, filler):
    uid = sorted(filler.users)[0]
    first = ws.open_builder(filler, uid, "rag-turn", embedder="hash")
    first.run(until_session=0)
    assert ws.open_builder(filler, uid, "rag-turn").build_id == first.build_id  # Memory page, Simulate, CLI alike
    assert ws.open_builder(filler, uid, "rag-turn").embedder is first.embedder  # one embedder per workspace
    fresh = ws.open_builder(filler, uid, "rag-turn", method_config={"k": 7})
    assert fresh.build_id != first.build_id
    assert ws.open_builder(filler, uid, "rag-turn").build_id == fresh.build_id  # the newest stored build wins
    with pytest.raises(KeyError, match="no user 'nobody'"):
        ws.open_builder(filler, "nobody", "rag-turn")


def test_every_store_lives_under_the_home_and_views_share_them(ws, tmp_path):
    from backends.config import load_config

    assert ws.runs.db is ws.memory.db is ws.sims.db is ws.evals.db is ws.reviews.db is ws.accounts.db
    assert ws.runs.db.path == tmp_path / "pal" / "runs.sqlite" and ws.synth.root == tmp_path / "pal" / "synth"
    view = ws.with_config(load_config(secrets={}, env={"PAL_JUDGE_MODEL": "other", "PAL_JUDGE_PROVIDER": "openai"}))
    assert view.sims is ws.sims and view.servers is ws.servers and view.embedder("hash") is ws.embedder("hash")
    assert view.llm().config.role("judge").model == "other" and ws.llm().config.role("judge").model != "other"


def test_logging_goes_to_a_file_under_the_home_at_the_configured_level(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_LOG_LEVEL", "WARNING")
    ws = make_workspace(tmp_path / "a")
    logging.getLogger("memory.somewhere").info("quiet detail")
    logging.getLogger("memory.somewhere").warning("loud problem %s", 42)
    text = ws.log_file.read_text(encoding="utf-8")
    assert ws.log_file == tmp_path / "a" / "logs" / "pal.log"
    assert "loud problem 42" in text and "quiet detail" not in text
    monkeypatch.setenv("PAL_LOG_LEVEL", "DEBUG")
    other = make_workspace(tmp_path / "b")
    logging.getLogger("sim.x").debug("now here")
    assert "now here" in other.log_file.read_text(encoding="utf-8")
    assert "now here" not in ws.log_file.read_text(encoding="utf-8")


def test_a_presentations_workspaces_leave_the_log_in_the_app_home(tmp_path):
    ws = make_workspace(tmp_path / "app")
    presented = Workspace(ws.home, ws.config, servers=ws.servers, read_only=True)
    staging = Workspace(tmp_path / "staging", ws.config, servers=ws.servers, takes_log=False)
    assert presented.log_file == staging.log_file == ws.log_file == tmp_path / "app" / "logs" / "pal.log"
    assert not (tmp_path / "staging" / "logs").exists()


LAB_KEY = "sk-lab-key-0123456789"


def _lab(tmp_path, **env):
    return make_workspace(tmp_path / "pal", env={"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_MODEL": "m",
                                                 "PAL_DEFAULT_BASE_URL": "https://llm.lab.example/v1",
                                                 "PAL_DEFAULT_API_KEY": LAB_KEY, **env})


def test_an_experiment_pointing_a_role_elsewhere_does_not_take_the_labs_key(tmp_path):
    """Audit finding 4: a role's base_url in an experiment file kept the configured API key."""
    from testkit.fault_server import FaultServer

    ws = _lab(tmp_path)
    with FaultServer(default=("ok", "hello")).running() as server:
        view = ws.configured({"roles": {"default": {"base_url": server.base_url}}})
        assert view.config.role("judge").api_key is None
        view.llm().chat("judge", [{"role": "user", "content": "hi"}], use_cache=False)
    assert server.headers and not any(LAB_KEY in " ".join(h.values()) for h in server.headers)
    same = ws.configured({"roles": {"judge": {"base_url": "https://llm.lab.example/v1", "temperature": 0.5}}})
    assert same.config.role("judge").api_key.get_secret_value() == LAB_KEY  # same endpoint: its key stays
    keyed = ws.configured({"roles": {"judge": {"api_key": "sk-other", "model": "n"}}})  # a key in a job is ignored
    assert keyed.config.role("judge").api_key.get_secret_value() == LAB_KEY


def test_an_experiment_obeys_the_allowed_endpoints(tmp_path, monkeypatch):
    from backends.config import ConfigError
    from studio.workspace import config_with

    ws = _lab(tmp_path)
    env = {"PAL_ALLOWED_ENDPOINTS": "llm.lab.example"}
    with pytest.raises(ConfigError, match="evil.example is not in PAL_ALLOWED_ENDPOINTS"):
        config_with(ws.config, {"roles": {"assistant": {"base_url": "https://evil.example/v1"}}}, env=env)
    assert config_with(ws.config, {"roles": {"assistant": {"model": "other"}}}, env=env).role("assistant").model == \
        "other"
    monkeypatch.setenv("PAL_ALLOWED_ENDPOINTS", "llm.lab.example")
    with pytest.raises(ConfigError, match="PAL_ALLOWED_ENDPOINTS"):
        ws.configured({"roles": {"default": {"base_url": "http://10.0.0.9:8000/v1"}}})
