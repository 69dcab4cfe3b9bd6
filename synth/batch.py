"""Several users at once (``pal generate``): deterministic run ids so the same command resumes, a thread pool."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from pydantic import BaseModel

from backends.llm.client import LLMClient
from synth.config import SynthConfig
from synth.pipeline import OnStep, Pipeline
from synth.steps.base import OnCall
from synth.store import SynthStore


class Planned(BaseModel):
    run_id: str
    config: SynthConfig
    out: str


class Outcome(BaseModel):
    run_id: str
    status: str
    uid: str | None = None
    error: str | None = None
    report: list[str] = []


def plan(out: str | Path, users: int, base: SynthConfig, seed_profiles: list[dict] | None = None) -> list[Planned]:
    """One run per user; its id hashes the command's inputs, so re-running the command finds the same runs."""
    out = str(Path(out).expanduser().resolve())
    key = "|".join([out, base.model_dump_json(exclude={"seed_profile"}),
                    str(len(seed_profiles or []))])
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    planned = []
    for i in range(users):
        seed_profile = seed_profiles[i % len(seed_profiles)] if seed_profiles else base.seed_profile
        config = base.model_copy(update={"seed": base.seed + i, "seed_profile": seed_profile})
        planned.append(Planned(run_id=f"cli-{digest}-{i}", config=config, out=out))
    return planned


def unfinished(store: SynthStore, out: str | Path) -> list[Planned]:
    """Every stored run aimed at ``out`` that has not finished (``pal generate --resume``)."""
    out = str(Path(out).expanduser().resolve())
    return [Planned(run_id=r.run_id, config=r.config, out=out) for r in reversed(store.list())
            if r.out == out and r.status != "finished"]


def run_batch(planned: list[Planned], llm: LLMClient, concurrency: int, store: SynthStore,
              on_step: Callable[[str], OnStep] | None = None, on_call: Callable[[str], OnCall] | None = None,
              cancel: threading.Event | None = None) -> list[Outcome]:
    """Run (or continue) every planned user; finished ones are left as they are."""

    def one(p: Planned) -> Outcome:
        pipe = Pipeline.create(p.config, p.out, store, run_id=p.run_id, llm=llm,
                               on_step=on_step(p.run_id) if on_step else None,
                               on_call=on_call(p.run_id) if on_call else None, cancel=cancel)
        info = pipe.info if pipe.info.status == "finished" else pipe.run()
        return Outcome(run_id=p.run_id, status=info.status, uid=info.uid, error=info.error,
                       report=pipe.report().lines())

    outcomes: dict[str, Outcome] = {}
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = [pool.submit(one, p) for p in planned]
        for f in as_completed(futures):
            o = f.result()
            outcomes[o.run_id] = o
    return [outcomes[p.run_id] for p in planned]
