"""Fixtures for the synthesis tests: a temporary PAL_HOME, the schema-driven fake, small configs."""

from __future__ import annotations

import json

import pytest

from synth.config import SynthConfig
from synth.pipeline import Pipeline
from testkit.workspace import make_workspace
from tests.synth.fakes import SchemaLLM, make_llm

SEED = {"id": "0000", "name": "Zhang Tianyu", "gender": "Male", "age": 26,
        "occupation": "The user is a programmer at a start-up who maintains mobile apps.",
        "health status": "The user has occasional neck pain from long hours at the desk.",
        "family members": "The user lives with his retired parents and his younger sister.",
        "hobbies": "The user plays basketball and reads science fiction.",
        "personality": {"Openness": "high", "Conscientiousness": "high", "Extraversion": "medium",
                        "Agreeableness": "medium", "Neuroticism": "medium"}}


def small_config(**kw) -> SynthConfig:
    base = dict(lang="en", months=2, seed=7, seed_profile=SEED, situations_min=2, situations_max=3, min_logs=4,
                max_logs=6, retries=2, tolerable_retries=1)
    return SynthConfig(**{**base, **kw})


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    return tmp_path / "pal"


@pytest.fixture
def fake():
    return SchemaLLM()


@pytest.fixture
def make_pipeline(home, fake, tmp_path):
    """Pipeline over the fake; ``out`` defaults to a fresh dataset folder."""

    def make(config: SynthConfig | None = None, run_id: str = "run-1", out=None, llm_fake=None, **kw) -> Pipeline:
        llm = make_llm(home, llm_fake or fake)
        return Pipeline.create(config or small_config(), str(out or tmp_path / "ds"), make_workspace(home).synth,
                               run_id=run_id, llm=llm, **kw)

    return make


def dump(value) -> str:
    return json.dumps(value, ensure_ascii=False)
