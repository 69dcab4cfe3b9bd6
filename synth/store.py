"""Where a generation run keeps its state: JSON files under ``PAL_HOME/synth/<run_id>/``.

``run.json`` holds the config and status, ``steps/<step>.json`` each finished step's output with
what produced it, and ``units/<step>/<unit>.json`` the finished LLM calls of a step still running
(one per month, situation or topic), so an interrupted step resumes at its next call. Every write
is atomic (temporary file, then rename): a killed process never leaves half a file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from synth.config import SynthConfig

Status = Literal["new", "running", "finished", "failed", "cancelled"]


class RunInfo(BaseModel):
    """One user's generation run."""

    model_config = ConfigDict(extra="forbid")
    run_id: str
    config: SynthConfig
    out: str | None = None  # dataset folder the user is assembled into
    uid: str | None = None  # the user id given at assembly
    status: Status = "new"
    error: str | None = None
    generations: dict[str, int] = Field(default_factory=dict)  # times each step was invalidated (fresh answers)
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)


class StepRecord(BaseModel):
    """A finished step: its output and how it was made."""

    model_config = ConfigDict(extra="forbid")
    step: str
    output: Any
    prompts: list[str] = Field(default_factory=list)  # prompt name@version of every call
    calls: int = 0
    retries: int = 0  # validation retries (answers rejected and asked again)
    fixes: dict[str, int] = Field(default_factory=dict)  # tolerable errors repaired, by kind
    errors: list[str] = Field(default_factory=list)  # the rejection messages
    reasoning: list[str] = Field(default_factory=list)  # a reasoning model's thinking per call, kept apart
    seconds: float = 0.0
    edited: bool = False
    finished_at: float = Field(default_factory=time.time)


class UnitRecord(BaseModel):
    """One finished LLM call inside a running step."""

    model_config = ConfigDict(extra="forbid")
    value: Any
    prompt: str | None = None
    attempts: int = 1
    errors: list[str] = Field(default_factory=list)
    reasoning: str = ""  # the accepted answer's thinking (never parsed)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class SynthStore:
    """Runs under one root (the workspace's ``PAL_HOME/synth``)."""

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def locks(self) -> Path:
        """Lock files of the dataset folders generation writes into (one writer per folder)."""
        path = self.root / "locks"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _dir(self, run_id: str) -> Path:
        return self.root / _safe(run_id)

    # ------------------------------------------------------------------ runs

    def create(self, run_id: str, config: SynthConfig, out: str | None = None) -> RunInfo:
        """A new run, or the stored one when ``run_id`` exists (its config wins: resuming never changes it)."""
        if self.exists(run_id):
            return self.load(run_id)
        info = RunInfo(run_id=run_id, config=config, out=out)
        self.save(info)
        return info

    def exists(self, run_id: str) -> bool:
        return (self._dir(run_id) / "run.json").is_file()

    def load(self, run_id: str) -> RunInfo:
        path = self._dir(run_id) / "run.json"
        if not path.is_file():
            raise KeyError(f"no generation run {run_id!r}")
        return RunInfo.model_validate_json(path.read_text(encoding="utf-8"))

    def save(self, info: RunInfo) -> None:
        info.updated_at = time.time()
        _write_atomic(self._dir(info.run_id) / "run.json", info.model_dump_json(indent=1))

    def list(self) -> list[RunInfo]:
        runs = [RunInfo.model_validate_json(p.read_text(encoding="utf-8")) for p in self.root.glob("*/run.json")]
        return sorted(runs, key=lambda r: r.created_at, reverse=True)

    def delete(self, run_id: str) -> None:
        shutil.rmtree(self._dir(run_id), ignore_errors=True)

    # ------------------------------------------------------------------ steps

    def step(self, run_id: str, step: str) -> StepRecord | None:
        path = self._dir(run_id) / "steps" / f"{step}.json"
        return StepRecord.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None

    def done_steps(self, run_id: str) -> set[str]:
        return {p.stem for p in (self._dir(run_id) / "steps").glob("*.json")}

    def put_step(self, run_id: str, record: StepRecord) -> None:
        _write_atomic(self._dir(run_id) / "steps" / f"{record.step}.json",
                      json.dumps(record.model_dump(mode="json"), ensure_ascii=False, indent=1))
        shutil.rmtree(self._dir(run_id) / "units" / record.step, ignore_errors=True)

    def drop_step(self, run_id: str, step: str) -> None:
        """Forget a step's output and any unfinished calls of it."""
        (self._dir(run_id) / "steps" / f"{step}.json").unlink(missing_ok=True)
        shutil.rmtree(self._dir(run_id) / "units" / step, ignore_errors=True)

    # ------------------------------------------------------------------ units (calls inside a running step)

    def unit(self, run_id: str, step: str, unit: str) -> UnitRecord | None:
        path = self._dir(run_id) / "units" / step / f"{_safe(unit)}.json"
        return UnitRecord.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None

    def put_unit(self, run_id: str, step: str, unit: str, record: UnitRecord) -> None:
        _write_atomic(self._dir(run_id) / "units" / step / f"{_safe(unit)}.json",
                      json.dumps(record.model_dump(mode="json"), ensure_ascii=False))
