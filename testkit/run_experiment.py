"""Run an experiment file over a home with the scripted protocol LLM (:mod:`testkit.protocol_fake`), the way
``pal experiment run`` does: ``python -m testkit.run_experiment HOME FILE [--slow SECONDS] [--concurrency N]
[--executor threads|ray]``. Prints the job's final line. Used by tests that kill it mid-run and by benches."""

from __future__ import annotations

import argparse
from pathlib import Path

from backends.config import ROLES
from backends.llm.fake import ScriptedLLM
from protocol.calibration import Calibration
from protocol.config import ExperimentConfig, load_experiment
from protocol.plan import Plan, make_plan
from studio.units import UnitEnv
from studio.workspace import Workspace
from testkit.protocol_fake import SlowReply, protocol_reply
from testkit.workspace import make_workspace


def open_experiment(home: Path, file: str | Path, slow: float = 0.0) -> tuple[Workspace, ExperimentConfig, Plan]:
    """(workspace with the scripted LLM for every role, experiment, plan)."""
    reply = SlowReply(slow) if slow else protocol_reply
    ws = make_workspace(home, dict.fromkeys(ROLES, ScriptedLLM(reply)), env={"PAL_EMBEDDER": "hash"})
    exp = load_experiment(file)
    view = ws.configured(exp.job_config())
    plan = make_plan(exp, ws.dataset(exp.dataset), view.config, Calibration.load(view.runs, view.memory))
    return ws, exp, plan


def run(home: Path, file: str | Path, slow: float = 0.0, concurrency: int | None = None, executor=None) -> str:
    """Run the experiment to its end; ``executor``: a function of the workspace giving one (e.g. Ray's)."""
    ws, exp, plan = open_experiment(home, file, slow)
    executor = executor(ws) if executor is not None else None
    view = ws.configured(exp.job_config())
    job = ws.jobs.submit(plan.job, env=UnitEnv(view, view.llm(session_id=plan.job.job_id)))
    summary = ws.jobs.run(job, concurrency or exp.concurrency, executor=executor)
    return summary.line()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home")
    parser.add_argument("file")
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int)
    args = parser.parse_args()
    print(run(Path(args.home), args.file, args.slow, args.concurrency), flush=True)


if __name__ == "__main__":
    main()
