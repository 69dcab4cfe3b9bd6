"""The experiment file: a pydantic model that forbids unknown fields; every error names the file and the field.

Relative paths (``dataset``) are relative to the file's folder. Role endpoints override the platform's
configuration for this experiment's units only (never an API key: keys come from the environment or
secrets.toml, as for every role).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from backends.config import ROLES, EndpointLimits
from evaluation.faireval import ASPECTS, Aspect
from evaluation.simfidelity.types import SimFidelityConfig
from memory.methods import METHODS
from palset.dataset import dataset_digest
from sim.types import parse_variant

Task = Literal["build", "restatement", "proposal", "selection", "dialogue", "faireval", "simulator-fidelity",
               "memory-fidelity", "personamem"]
AVAILABLE: tuple[str, ...] = ("build", "restatement", "proposal", "selection", "dialogue", "faireval",
                              "simulator-fidelity")
NOT_YET = {"memory-fidelity": "memory fidelity (ground-truth memory) is not on this branch yet",
           "personamem": "PersonaMem-v2 inside an experiment is not available yet (use `pal personamem`)"}
SINGLE_TURN = ("restatement", "proposal", "selection")


class ExperimentError(ValueError):
    """The experiment file is unreadable or wrong; the message names the file and the field."""


class RoleEndpoint(BaseModel):
    """How one role (or ``default``: every role) reaches its LLM in this experiment."""

    model_config = ConfigDict(extra="forbid")
    provider: Literal["local", "openai"] | None = None
    base_url: str | None = None
    model: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=32768)
    timeout: float | None = Field(None, gt=0, le=3600)
    max_retries: int | None = Field(None, ge=0, le=20)
    structured_mode: Literal["json_schema", "json_object", "prompt"] | None = None


class ExperimentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    dataset: str
    users: list[str] | Literal["all"] = "all"
    methods: list[str] = Field(min_length=1)
    baseline: str
    tasks: list[Task] = Field(min_length=1)
    topics: Literal["query", "all"] = "query"
    topics_per_user: int | None = Field(None, ge=1)  # the first N topics of each user (small demo experiments)
    k: int = Field(3, ge=1, le=10)
    aspects: list[Aspect] = Field(default_factory=lambda: list(ASPECTS))
    threshold: float = Field(0.0, ge=0)
    seeds: list[str] = Field(default_factory=lambda: ["0"], min_length=1)
    concurrency: int = Field(4, ge=1, le=512)
    roles: dict[str, RoleEndpoint] = Field(default_factory=dict)
    limits: dict[str, EndpointLimits] = Field(default_factory=dict)
    bootstrap_seed: int = 0
    # who plays the user in the dialogues: llm, llm+style, replay, always-accept, random-verdict (sim.types)
    simulators: list[str] = Field(default_factory=lambda: ["llm"], min_length=1)
    simulator_fidelity: SimFidelityConfig = Field(default_factory=SimFidelityConfig)

    @field_validator("simulators")
    @classmethod
    def _known_simulators(cls, v: list[str]) -> list[str]:
        for name in v:
            parse_variant(name)
        if len(set(v)) != len(v):
            raise ValueError("a simulator is listed twice")
        return v

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, v: list[str]) -> list[str]:
        for m in v:
            if m not in METHODS:
                raise ValueError(f"unknown memory method {m!r} (methods: {', '.join(METHODS)})")
        if len(set(v)) != len(v):
            raise ValueError("a method is listed twice")
        return v

    @field_validator("baseline")
    @classmethod
    def _known_baseline(cls, v: str) -> str:
        if v not in METHODS:
            raise ValueError(f"unknown memory method {v!r} (methods: {', '.join(METHODS)})")
        return v

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, v: dict[str, RoleEndpoint]) -> dict[str, RoleEndpoint]:
        for role in v:
            if role not in ("default", *ROLES):
                raise ValueError(f"[roles.{role}] is not a role (roles: default, {', '.join(ROLES)})")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentConfig:
        if self.baseline in self.methods:
            raise ValueError(f"baseline {self.baseline!r} is also in methods")
        if "faireval" in self.tasks and "dialogue" not in self.tasks:
            raise ValueError("tasks: faireval judges the dialogues, so it needs the dialogue task too")
        if "simulator-fidelity" in self.tasks and "dialogue" not in self.tasks:
            raise ValueError("tasks: simulator-fidelity checks the dialogues' simulated users, so it needs the "
                             "dialogue task too")
        return self

    # ------------------------------------------------------------------ derived

    @property
    def all_methods(self) -> list[str]:
        """The methods under test, then the baseline."""
        return [*self.methods, self.baseline]

    def available_tasks(self) -> list[str]:
        return [t for t in self.tasks if t in AVAILABLE]

    def unavailable(self) -> dict[str, str]:
        return {t: NOT_YET[t] for t in self.tasks if t in NOT_YET}

    def job_config(self) -> dict:
        """What the job stores: role endpoints and limits for its units, and the experiment itself."""
        return {"roles": {r: e.model_dump(exclude_none=True) for r, e in self.roles.items()},
                "limits": {k: v.model_dump() for k, v in self.limits.items()},
                "experiment": self.model_dump(mode="json")}

    def job_id(self) -> str:
        """Stable across edits of the file (more users or methods add units to the same job)."""
        return f"exp-{self.name}-{dataset_digest(self.dataset)}"


def load_experiment(path: str | Path) -> ExperimentConfig:
    """Read and validate an experiment file; relative ``dataset`` paths resolve against the file's folder."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ExperimentError(f"{path}: cannot read ({e.strerror or e})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ExperimentError(f"{path}: not valid TOML ({e})") from None
    if isinstance(data.get("dataset"), str) and not Path(data["dataset"]).expanduser().is_absolute():
        data["dataset"] = str((path.parent / data["dataset"]).resolve())
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(file)"
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = "unknown field (not an experiment setting)"
        raise ExperimentError(f"{path}: {where}: {msg}") from None
