"""Records of a simulation: the run (what was simulated, with which settings) and every utterance as it happened."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backends.llm.context import Cut
from palset.vocab import Act

Side = Literal["user", "assistant"]
Actor = Literal["simulator", "assistant", "human"]
Status = Literal["running", "finished", "stopped", "failed"]
Mode = Literal["fixed", "free"]


class Utterance(BaseModel):
    """One side of one turn, saved the moment it exists."""

    model_config = ConfigDict(extra="forbid")
    turn_no: int
    side: Side
    actor: Actor
    act: Act
    content: str
    prompt_name: str | None = None
    prompt_version: str | None = None
    prompt: str | None = None  # the exact messages sent, rendered as text (for the UI's "prompt" expander)
    retrieval_query: str | None = None
    trace: dict[str, Any] | None = None  # memory.types.RetrievalTrace.summary() (its "cuts": the memory's)
    cuts: list[Cut] = Field(default_factory=list)  # the dialogue so far, trimmed to fit the window (sim.fit)
    reasoning: str = ""  # a reasoning model's thinking, kept apart: never shown as the utterance nor sent again
    attempts: int = 1
    model: str | None = None
    latency_ms: float = 0.0
    created_at: float = 0.0


class RunSpec(BaseModel):
    """What to simulate. ``run_id`` is derived from it, so the same spec resumes the same run."""

    model_config = ConfigDict(extra="forbid")
    dataset: str  # dataset key (resolved folder path)
    user_id: str
    sample_id: str
    topic_key: str
    method: str
    mode: Mode = "fixed"
    seed: str = "0"
    max_turns: int = Field(10, ge=1, le=40)
    free_query: str | None = None  # free text instead of the topic's user query


class RunRecord(BaseModel):
    """A run as stored: its spec, status, schedule, settings and every utterance."""

    run_id: str
    spec: RunSpec
    status: Status = "running"
    schedule: list[tuple[Act, Act]] = Field(default_factory=list)
    schedule_source: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)  # models, temperatures per role (no keys)
    error: str | None = None
    pair_id: str | None = None
    utterances: list[Utterance] = Field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def task_id(self) -> str:
        return f"{self.spec.sample_id}_{self.spec.topic_key}"

    def transcript(self) -> list[tuple[str, str]]:
        return [(u.side, u.content) for u in self.utterances]
