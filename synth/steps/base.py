"""What every synthesis step shares: the :class:`Step` contract and the :class:`StepContext` it runs in.

A step reads the outputs of the steps it depends on (``deps``, declared explicitly: they define which
outputs an edit invalidates), makes its LLM calls through :meth:`StepContext.ask` — one prompt file
per step, a bounded reply schema, the step's rules as the client's ``check`` hook so a rejected answer
is asked again with the reason — and returns a typed output. Random choices come from
:meth:`StepContext.rng`, seeded by the run's seed, the step and the unit, so re-running a step makes
the same choices and one step's edits never shift another step's dice.

Prompts fit the synthesizer's context window by the client's policy (:mod:`backends.llm.structured_call`,
:mod:`backends.llm.context`): the step's own prompt is never cut; the correction turns of a re-ask are (the
oldest first, then the last rejected answer shortened), and ``max_tokens`` is lowered to what the window
leaves (never below a quarter of it). A prompt that still cannot fit fails the step with the numbers before
anything is sent. A reasoning model's thinking is kept apart and stored with the step (``reasoning``).

A step whose calls do not depend on each other (one per situation, per topic, per aspect) maps them with
:meth:`StepContext.fan_out`: they go out together as the endpoint allows, each stored the moment it is answered,
and the step's record (calls, retries, errors, repairs, thinking) is written in the calls' order — the same record
whether they ran together or one after another.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel

from backends.llm.client import LLMClient
from backends.llm.errors import Cancelled
from backends.llm.types import StructuredFailure
from backends.prompts import load_prompt
from synth.config import SynthConfig
from synth.store import RunInfo, StepRecord, SynthStore, UnitRecord

R = TypeVar("R", bound=BaseModel)
T = TypeVar("T")
V = TypeVar("V")
ROLE = "synthesizer"
OnCall = Callable[[str, str], None]  # (step, what the call is about)


class Tolerable(str):
    """A rule a small model may keep failing (a repeated text, two needs alike): the answer is asked again
    ``tolerable_retries`` times, then accepted and counted under ``kind`` in the quality report. Structural
    rules (counts, ids, formats) are plain strings and never tolerated."""

    kind: str

    def __new__(cls, text: str, kind: str) -> Tolerable:
        obj = super().__new__(cls, text)
        obj.kind = kind
        return obj


def first_problem(problems: list[str | None]) -> str | None:
    """The first structural problem, else the first tolerable one: a tolerated answer must have no other fault."""
    found = [p for p in problems if p]
    return next((p for p in found if not isinstance(p, Tolerable)), found[0] if found else None)


class StepFailed(RuntimeError):
    """A step could not produce a valid output; the message names the call and the last rejection."""


@dataclass
class StepContext:
    run: RunInfo
    step: str
    inputs: dict[str, Any]
    store: SynthStore
    llm: LLMClient | None = None
    cancel: threading.Event | None = None
    on_call: OnCall | None = None
    record: StepRecord = field(init=False)

    def __post_init__(self) -> None:
        self.record = StepRecord(step=self.step, output=None)
        self._started = time.perf_counter()
        self._deferred = threading.local()  # inside fan_out: this thread's item's accounting, applied in item order

    @property
    def config(self) -> SynthConfig:
        return self.run.config

    def rng(self, unit: str = "") -> random.Random:
        """A generator seeded by (run seed, step, unit): the same choices every time this step runs."""
        return random.Random(f"{self.config.seed}/{self.step}/{unit}")

    def fix(self, kind: str, n: int = 1) -> None:
        """Count a tolerable error that was repaired (shown in the quality report)."""
        def change() -> None:
            self.record.fixes[kind] = self.record.fixes.get(kind, 0) + n

        if n:
            self._note(change)

    def _note(self, change: Callable[[], None]) -> None:
        """Apply a change to the step's record now, or after the fan-out item it belongs to (in item order)."""
        pending: list[Callable[[], None]] | None = getattr(self._deferred, "changes", None)
        if pending is None:
            change()
        else:
            pending.append(change)

    def fan_out(self, fn: Callable[[T], V], items: Sequence[T]) -> list[V]:
        """``[fn(item) for item in items]`` with independent calls in flight together (as many as the synthesizer's
        endpoint allows, :meth:`backends.llm.client.LLMClient.fan_out`); results and the record in item order."""
        changes: list[list[Callable[[], None]]] = [[] for _ in items]

        def one(job: tuple[int, T]) -> V:
            self._deferred.changes = changes[job[0]]
            try:
                return fn(job[1])
            finally:
                self._deferred.changes = None

        jobs = list(enumerate(items))
        results = self.llm.fan_out(ROLE, one, jobs, self.cancel) if self.llm is not None else [one(j) for j in jobs]
        for item_changes in changes:
            for change in item_changes:
                change()
        return results

    def ask(self, unit: str, prompt_name: str, values: dict[str, object], reply: type[R],
            check: Callable[[R], str | None] | None = None, max_tokens: int | None = None,
            retries: int | None = None) -> R:
        """One LLM call of this step, or its stored answer when a previous (interrupted) run finished it."""
        prompt = load_prompt(prompt_name)
        done = self.store.unit(self.run.run_id, self.step, unit)
        if done is not None:
            self._account(prompt.label, done)
            return reply.model_validate(done.value)
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled(f"stopped before {self.step} {unit}".strip())
        if self.llm is None:
            raise StepFailed(f"{self.step}: no LLM client to call")
        if self.on_call:
            self.on_call(self.step, unit)
        rejected: list[str] = []

        def checked(value: R) -> str | None:
            problem = check(value) if check is not None else None
            tolerated = sum(isinstance(r, Tolerable) for r in rejected)
            if isinstance(problem, Tolerable) and tolerated >= self.config.tolerable_retries:
                self.fix(f"accepted after {tolerated} re-ask(s): {problem.kind}")
                return None
            if problem:
                rejected.append(problem)
            return problem

        messages = prompt.messages(**values)  # shared context first (system), the step's own part last
        overrides: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens else {}
        # the run's seed also seeds sampling (endpoints that honour it, e.g. the local server, repeat themselves);
        # a re-run of the step (a new generation) samples afresh
        generation = self.run.generations.get(self.step, 0)
        overrides["seed"] = int(hashlib.sha1(f"{self.config.seed}/{self.step}/{unit}/{generation}".encode())
                                .hexdigest()[:8], 16)
        result = self.llm.structured(ROLE, messages, reply, prompt=prompt, check=checked,
                                     retries=self.config.retries if retries is None else retries,
                                     cache_salt=f"{self.run.run_id}/{self.step}/{unit}/{self.run.generations.get(self.step, 0)}", cancel=self.cancel,
                                     **overrides)
        if not result.ok:
            failed: StructuredFailure = result

            def change() -> None:
                self.record.retries += failed.attempts
                self.record.errors += failed.errors

            self._note(change)
            last = result.errors[-1] if result.errors else "no answer"
            raise StepFailed(f"{self.step} {unit}: no valid answer after {result.attempts} attempt(s): {last}".replace("  ", " "))
        rec = UnitRecord(value=result.value.model_dump(mode="json"), prompt=prompt.label, attempts=result.attempts,
                         errors=rejected, reasoning=result.reasoning)
        self.store.put_unit(self.run.run_id, self.step, unit, rec)
        self._account(prompt.label, rec)
        return result.value

    def _account(self, label: str, done: UnitRecord) -> None:
        def change() -> None:
            self.record.calls += 1
            self.record.retries += done.attempts - 1
            self.record.errors += done.errors
            if done.reasoning:
                self.record.reasoning.append(done.reasoning)
            if label not in self.record.prompts:
                self.record.prompts.append(label)

        self._note(change)

    def finish(self, output: BaseModel) -> StepRecord:
        self.record.output = output.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.record.seconds = time.perf_counter() - self._started
        return self.record


class Step(ABC):
    """One synthesis step. Subclasses set the class attributes and implement :meth:`run` and :meth:`check`."""

    name: ClassVar[str]
    title: ClassVar[str]
    spec: ClassVar[str]  # section of the Mem-PAL spec
    deps: ClassVar[tuple[str, ...]] = ()
    output_model: ClassVar[type[BaseModel]]
    prompt: ClassVar[str | None] = None  # prompt file (None: no LLM call)

    @abstractmethod
    def run(self, ctx: StepContext) -> BaseModel:
        """Make the step's output from ``ctx.inputs`` (LLM calls through ``ctx.ask``)."""

    def check(self, output: Any, inputs: dict[str, Any], config: SynthConfig) -> list[str]:
        """The step's rules on a stored output (a person's edit must pass them too); [] when valid."""
        return []
