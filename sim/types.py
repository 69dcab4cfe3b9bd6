"""Records of a simulation: the run (what was simulated, with which settings) and every utterance as it happened."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from backends.llm.context import Cut
from palset.vocab import Act

Side = Literal["user", "assistant"]
Actor = Literal["simulator", "assistant", "human"]
Status = Literal["running", "finished", "stopped", "failed"]
Mode = Literal["fixed", "free"]
# Who plays the user: the User-LLM (``llm``) or a reference simulator of :mod:`sim.reference` — the dataset's own
# dialogue replayed (the ceiling), always accepting, or a seeded random verdict (the floors).
SimulatorKind = Literal["llm", "replay", "always-accept", "random-verdict"]
SIMULATOR_KINDS: tuple[str, ...] = ("llm", "replay", "always-accept", "random-verdict")


COMPOSED = "composed from the model's decision"  # how a composed turn's ``fallback`` starts (sim.decision)
Stance = Literal["accept", "reject", "partial"]


class Draft(BaseModel):
    """One draft the model wrote for a user turn: its words, and why it was sent back (empty: it was not)."""

    model_config = ConfigDict(extra="forbid")
    text: str
    reasons: list[str] = Field(default_factory=list)  # the turn rules' reasons that sent it back
    kept: bool = False  # the draft sent as the turn (its ``content``)


class TurnDecision(BaseModel):
    """The user's structured decision behind a judging turn (:mod:`sim.decision`): the stance is read from it, not
    from the words. ``derived``: read back from the ``fallback`` text of a turn stored before decisions were kept."""

    model_config = ConfigDict(extra="forbid")
    act: Act
    field: Literal["guessed", "accept"]  # the decision's field: a guess confirmed, a suggestion accepted
    value: bool
    clause: str = ""  # the model's own words beside the decision
    clause_kept: bool = False  # whether the clause is part of the turn sent
    derived: bool = False

    @property
    def stance(self) -> Stance:
        """``accept`` for a confirmed guess or an accepted suggestion, ``reject`` otherwise."""
        return "accept" if self.value else "reject"


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
    # a retrieval method's assistant turn: the note sent after the user's words (the memory this turn retrieved that
    # earlier notes did not show, and the act), exactly as sent; later turns keep it in their transcript, so a
    # prompt cache serves it (sim.prompting.assistant_messages). None: nothing kept (a memory in the system message)
    note: str | None = None
    trace: dict[str, Any] | None = None  # memory.types.RetrievalTrace.summary() (its "cuts": the memory's)
    cuts: list[Cut] = Field(default_factory=list)  # the dialogue so far, trimmed to fit the window (sim.fit)
    reasoning: str = ""  # a reasoning model's thinking, kept apart: never shown as the utterance nor sent again
    attempts: int = 1
    fallback: str = ""  # why the text is not the model's own draft (sim.simulator: an opening none of whose drafts spoke as the
    # user: the user query; sim.decision: a judging turn composed from the model's decision, ``COMPOSED`` first)
    # every intervention on the record: each draft with the reasons it was sent back, and the structured decision a
    # judging turn was composed from; ``drafts_kept`` False: a turn recorded before drafts were kept (its attempts
    # and fallback are all there is, sim.interventions)
    drafts: list[Draft] = Field(default_factory=list)
    decision: TurnDecision | None = None
    drafts_kept: bool = False
    model: str | None = None
    latency_ms: float = 0.0
    created_at: float = 0.0

    @property
    def composed(self) -> bool:
        """A judging turn composed from the model's decision (:mod:`sim.decision`): the decision is the model's,
        the words are not (an opening sent as the user query is a fallback too, but not composed)."""
        return self.fallback.startswith(COMPOSED)


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
    simulator: SimulatorKind = "llm"
    # the User-LLM's messages also get prompts/sim/user_style.md: profile and message style from the user's own
    # turns of earlier sessions (sim.style); only for the ``llm`` simulator
    user_style: bool = False

    def identity(self) -> dict[str, Any]:
        """What the run id is derived from: every field, except the simulator options left at their defaults (so
        runs made before those options existed keep their ids)."""
        data = self.model_dump()
        for name in ("simulator", "user_style"):
            if data[name] == type(self).model_fields[name].default:
                del data[name]
        return data

    @model_validator(mode="after")
    def _simulator_options(self) -> RunSpec:
        if self.user_style and self.simulator != "llm":
            raise ValueError(f"user_style conditions the User-LLM's prompt: the {self.simulator} simulator has none")
        if self.simulator == "replay" and self.mode != "fixed":
            raise ValueError("the replay simulator replays the dataset's dialogue: it needs the fixed schedule")
        return self

    @property
    def simulator_variant(self) -> str:
        """``llm``, ``llm+style`` or the reference simulator's name: how the leaderboard and the CLI name it."""
        return f"{self.simulator}+style" if self.user_style else self.simulator


def parse_variant(variant: str) -> tuple[SimulatorKind, bool]:
    """(simulator, user_style) of ``llm``, ``llm+style``, ``replay``, ``always-accept`` or ``random-verdict``;
    ``ValueError`` naming the choices otherwise."""
    name, _, extra = variant.strip().partition("+")
    if name not in SIMULATOR_KINDS or extra not in ("", "style") or (extra and name != "llm"):
        raise ValueError(f"unknown simulator {variant!r} (simulators: {', '.join(SIMULATOR_VARIANTS)})")
    return cast(SimulatorKind, name), extra == "style"


SIMULATOR_VARIANTS: tuple[str, ...] = ("llm", "llm+style", "replay", "always-accept", "random-verdict")


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


class UserSide(Protocol):
    """Who writes the user's turns: the User-LLM (:class:`sim.simulator.UserSimulator`) or a reference simulator
    (:mod:`sim.reference`)."""

    kind: str

    def say(self, turn_no: int, act: Act, history: list[Utterance], salt: str,
            on_token: Callable[[str], None] | None = None) -> tuple[Utterance, bool]:
        """(the user's utterance in ``act``, whether the user wants to end the dialogue); ``on_token`` gets the
        text as it is written (a streaming page)."""
        ...
