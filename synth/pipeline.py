"""Run one user's synthesis, step by step, resumably; inspect, edit and re-run any step.

Steps run in the order of :data:`synth.registry.STEPS`, those that do not depend on each other together when the
synthesizer's endpoint serves several calls at once (and the independent calls inside a step too:
:meth:`synth.steps.base.StepContext.fan_out`); every output is the same either way. Each finished step is stored at
once (and each finished LLM call inside a running step), so a run stopped anywhere — cancel, closed browser, killed process, endpoint failure — continues at its next
missing call. Editing a step's output validates it against the step's schema and rules, then drops
exactly the steps downstream of it (:func:`synth.registry.downstream`); the next run regenerates them.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from backends.llm.client import LLMClient
from backends.llm.errors import Cancelled, LLMError
from backends.llm.patience import again_on_timeout
from backends.prompts import PromptError
from backends.store.runstore import RunStore, Totals
from synth.config import SynthConfig
from synth.registry import NAMES, STEPS, downstream, get_step
from synth.report import QualityReport, build_report
from synth.steps.base import OnCall, StepContext, StepFailed, Tolerable
from synth.store import RunInfo, StepRecord, SynthStore

log = logging.getLogger(__name__)
MAX_EDIT_CHARS = 2_000_000  # a step's edited output (the largest real ones are a few hundred KB)

Event = Literal["start", "done", "failed", "cancelled"]
OnStep = Callable[[str, Event, StepRecord | None], None]


def new_run_id() -> str:
    return f"gen-{uuid.uuid4().hex[:10]}"


def field_errors(e: ValidationError) -> list[str]:
    """Pydantic errors as 'field.path: message' lines a person can act on."""
    return [f"{'.'.join(str(p) for p in err['loc']) or 'output'}: {err['msg']}" for err in e.errors()[:20]]


class Pipeline:
    """One run's steps over a :class:`SynthStore`; LLM calls are tagged with the run id in the run store."""

    def __init__(self, run_id: str, store: SynthStore, llm: LLMClient | None = None,
                 on_step: OnStep | None = None, on_call: OnCall | None = None, cancel: threading.Event | None = None,
                 calls: RunStore | None = None):
        self.store = store
        self.run_id = run_id
        self.llm = llm.for_run(run_id) if llm is not None else None
        self.calls = calls if calls is not None else (llm.store if llm is not None else None)
        self.on_step, self.on_call = on_step, on_call
        self.cancel = cancel

    @classmethod
    def create(cls, config: SynthConfig, out: str | None, store: SynthStore, run_id: str | None = None,
               **kwargs: Any) -> Pipeline:
        info = store.create(run_id or new_run_id(), config, out)
        return cls(info.run_id, store, **kwargs)

    @property
    def info(self) -> RunInfo:
        return self.store.load(self.run_id)

    # ------------------------------------------------------------------ reading

    def record(self, step: str) -> StepRecord | None:
        return self.store.step(self.run_id, step)

    def records(self) -> dict[str, StepRecord]:
        return {n: r for n in NAMES if (r := self.record(n)) is not None}

    def output(self, step: str) -> Any:
        """The typed output of a finished step."""
        rec = self.record(step)
        if rec is None:
            raise KeyError(f"step {step} has not run")
        return get_step(step).output_model.model_validate(rec.output)

    def inputs_for(self, step: str) -> dict[str, Any]:
        return {d: self.output(d) for d in get_step(step).deps}

    def pending(self) -> list[str]:
        done = self.store.done_steps(self.run_id)
        return [n for n in NAMES if n not in done]

    def report(self) -> QualityReport:
        return build_report(self.records())

    def cost(self) -> Totals:
        """LLM calls, tokens so far (every call of this run, from the run store)."""
        if self.calls is None:
            raise ValueError(f"generation run {self.run_id}: no run store to read its cost from (pass calls=)")
        return self.calls.totals(run_id=self.run_id)

    # ------------------------------------------------------------------ running

    def run(self, until: str | None = None) -> RunInfo:
        """Run every missing step (up to ``until``, inclusive); failures and cancels are saved on the run."""
        info = self.info
        info.status, info.error = "running", None
        self.store.save(info)
        last = NAMES.index(until) if until else len(NAMES) - 1
        try:
            self._run_steps([s.name for s in STEPS[: last + 1] if self.record(s.name) is None])
        except Cancelled as e:
            log.info("generation %s cancelled: %s", self.run_id, e)
            return self._end("cancelled", str(e))
        except (StepFailed, LLMError, PromptError, ValueError) as e:
            log.warning("generation %s failed: %s", self.run_id, e)
            return self._end("failed", str(e))
        return self._end("finished" if not self.pending() else "new", None)

    def _run_steps(self, names: list[str]) -> None:
        """Run ``names`` (in run order), each once the steps it depends on are stored; steps that do not depend on
        each other run together when the synthesizer's endpoint serves several calls at once (the preferences beside
        the situations, the logs beside the requirement framework). A failure or cancel starts no further step; the
        steps running then finish and are stored, and the first failure in run order is raised."""
        width = self.llm.width("synthesizer") if self.llm is not None else 1
        pending, done = list(names), set(self.store.done_steps(self.run_id))
        running: dict[Future[StepRecord], str] = {}
        failures: dict[str, BaseException] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(width, len(names))), thread_name_prefix="synth-step") as pool:
            while pending or running:
                for name in [n for n in pending if all(d in done for d in get_step(n).deps)]:
                    if failures or len(running) >= width:
                        break
                    if self.cancel is not None and self.cancel.is_set():
                        failures[name] = Cancelled(f"stopped before {name}")
                        break
                    pending.remove(name)
                    running[pool.submit(self._run_step, name)] = name
                if not running:
                    break  # nothing can start: a failure, a cancel
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in finished:
                    name = running.pop(future)
                    if (error := future.exception()) is not None:
                        failures[name] = error
                    else:
                        done.add(name)
        if failures:
            raise failures[min(failures, key=NAMES.index)]

    def _run_step(self, name: str) -> StepRecord:
        step = get_step(name)
        if self.on_step:
            self.on_step(name, "start", None)
        inputs = self.inputs_for(name)
        if name == "assemble":
            inputs["_records"] = self.records()

        def attempt(llm: LLMClient | None) -> tuple[Any, StepContext]:
            ctx = StepContext(run=self.info, step=name, inputs=inputs, store=self.store, llm=llm,
                              cancel=self.cancel, on_call=self.on_call)
            return step.run(ctx), ctx

        try:  # a step whose call timed out asks again once, patiently; its finished calls are not asked again
            output, ctx = again_on_timeout(self.llm, attempt, f"generation {self.run_id} step {name}")
        except Cancelled:
            if self.on_step:
                self.on_step(name, "cancelled", None)
            raise
        except Exception:
            if self.on_step:
                self.on_step(name, "failed", None)
            raise
        record = ctx.finish(output)
        self.store.put_step(self.run_id, record)
        if self.on_step:
            self.on_step(name, "done", record)
        return record

    def _end(self, status: str, error: str | None) -> RunInfo:
        info = self.info
        info.status, info.error = status, error  # type: ignore[assignment]  # status is one of the Status literals
        self.store.save(info)
        return info

    # ------------------------------------------------------------------ editing

    def validate(self, step: str, data: Any) -> tuple[BaseModel | None, list[str]]:
        """Parse a person's output for ``step`` (JSON text or object); errors name the field."""
        s = get_step(step)
        if isinstance(data, str):
            if len(data) > MAX_EDIT_CHARS:
                return None, [f"the edit is {len(data):,} characters; a step's output is at most {MAX_EDIT_CHARS:,}"]
            try:
                data = json.loads(data)
            except json.JSONDecodeError as e:
                return None, [f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"]
            except RecursionError:
                return None, ["not valid here: the JSON is nested too deeply"]
        try:
            value = s.output_model.model_validate(data)
        except ValidationError as e:
            return None, field_errors(e)
        except RecursionError:
            return None, ["not valid here: the JSON is nested too deeply"]
        try:
            problems = [p for p in s.check(value, self.inputs_for(step), self.info.config)
                        if not isinstance(p, Tolerable)]  # a person may keep what the pipeline would tolerate
        except KeyError as e:
            return None, [f"cannot check: {e.args[0]}"]
        return (None, problems) if problems else (value, [])

    def edit(self, step: str, data: Any) -> list[str]:
        """Store a person's output for ``step`` when valid, dropping every step downstream; returns the errors."""
        value, problems = self.validate(step, data)
        if value is None:
            return problems
        old = self.record(step)
        record = StepRecord(step=step, output=value.model_dump(mode="json", by_alias=True, exclude_none=True),
                            prompts=old.prompts if old else [], calls=old.calls if old else 0,
                            retries=old.retries if old else 0, fixes=old.fixes if old else {}, edited=True)
        self.invalidate(step, include_self=False)
        self.store.put_step(self.run_id, record)
        return []

    def invalidate(self, step: str, include_self: bool = True) -> list[str]:
        """Drop ``step`` (optionally) and everything downstream; returns the steps that had output."""
        names = ([step] if include_self else []) + downstream(step)
        done = self.store.done_steps(self.run_id)
        for name in names:
            self.store.drop_step(self.run_id, name)
        info = self.info
        for name in names:  # a re-run asks afresh instead of replaying cached answers
            info.generations[name] = info.generations.get(name, 0) + 1
        if info.status == "finished":
            info.status = "new"
        self.store.save(info)
        return [n for n in names if n in done]

    def rerun_from(self, step: str) -> RunInfo:
        """Regenerate ``step`` and everything downstream of it."""
        self.invalidate(step)
        return self.run()
