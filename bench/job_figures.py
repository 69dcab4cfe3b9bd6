"""Job engine figures: memory builds of many users × 3 LLM methods as one experiment, against a local endpoint
answering every call after a fixed latency (its own process, so its CPU is not the platform's).

Reported: the sequential time (concurrency 1 on a pilot of 2 users, scaled to all users), then per concurrency
level the wall time, speedup over sequential and efficiency (speedup / concurrency; target ≥ 0.8 until the 2 cores
saturate — the process's CPU use is printed beside it, so saturation shows), calls/s; the engine's overhead over
the same builds run directly on a thread pool (target ≤ 5 %); the Ray-local executor's overhead over threads (target
≤ 10 % in the steady state, on a pool warmed by an earlier run; Ray's start and a cold pool's first run beside it); and
the plan's estimate of calls and tokens (calibrated on the pilot) against what the run used (target within 10 %).
The machine's load average is printed before and after: other processes share these cores.

Run: ``.venv/bin/python bench/job_figures.py [--users 32] [--sessions 3] [--levels 8,16,32] [--latency 0.2]
[--no-ray | --ray-only] [--rounds 2]`` (several minutes; temporary homes).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PAL_EMBEDDER"] = "hash"

from protocol.calibration import Calibration  # noqa: E402
from protocol.config import ExperimentConfig  # noqa: E402
from protocol.plan import make_plan  # noqa: E402
from studio.units import UnitEnv  # noqa: E402
from testkit.latency_server import LatencyServer  # noqa: E402
from testkit.release import make_release  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

METHODS = ["h2memory", "memorybank", "recursum"]


def workspace(home: Path, url: str):
    env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": url, "PAL_DEFAULT_MODEL": "bench",
           "PAL_EMBEDDER": "hash"}
    return make_workspace(home, env=env, secrets={"cache": False})


def experiment(dataset: Path, users: list[str], concurrency: int) -> ExperimentConfig:
    return ExperimentConfig(name="bench", dataset=str(dataset), users=users, methods=METHODS, baseline="vanilla",
                            tasks=["build"], concurrency=concurrency)


def run_engine(home: Path, url: str, exp: ExperimentConfig, cal: Calibration | None = None, executor=None) -> dict:
    """Run the experiment's job; with ``executor`` (a factory, e.g. ``ray_executor``) its pool is started and
    warmed first and timed apart (``warm``): ``wall`` is the run alone, as for threads."""
    ws = workspace(home, url)
    dataset = ws.dataset(exp.dataset)
    plan = make_plan(exp, dataset, ws.config, cal or Calibration.load(ws.runs, ws.memory))
    ws.jobs.submit(plan.job, env=UnitEnv(ws, ws.llm(session_id="bench")))
    t0 = time.perf_counter()
    runner = executor(ws) if executor else None
    if runner is not None:
        runner.warm_up(exp.concurrency)
    warm = time.perf_counter() - t0
    cpu0, t0 = time.process_time(), time.perf_counter()
    summary = ws.jobs.run(plan.job.job_id, exp.concurrency, executor=runner)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    used = ws.runs.totals()
    assert summary.status == "done", summary.errors
    return {"wall": wall, "warm": warm, "cpu": cpu, "calls": used.calls, "tin": used.tokens_in, "tout": used.tokens_out,
            "est_calls": plan.total("calls"), "est_tin": plan.total("tokens_in"), "est_tout": plan.total("tokens_out"),
            "ws": ws}


def run_raw(home: Path, url: str, dataset: Path, users: list[str], concurrency: int) -> float:
    """The same builds without the engine: one thread-pool task per (user, method), each building in time order."""
    ws = workspace(home, url)
    ds = ws.dataset(dataset)
    pairs = [(u, m) for u in users for m in METHODS]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda p: ws.open_builder(ds, p[0], p[1], llm=ws.llm(), method_config={}).run(), pairs))
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=32)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--levels", default="8,16,32")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--ray-only", action="store_true", help="only the Ray-local against threads figure")
    parser.add_argument("--rounds", type=int, default=2, help="threads and Ray runs alternated for that figure")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pal-jobs-bench-"))
    print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (cores: {os.cpu_count()})")
    url = LatencyServer.in_process(args.latency)
    dataset = make_release(tmp / "ds", users=args.users, sessions=args.sessions, logs_per_session=10, turns=8,
                           query_sessions=1)
    users = sorted(workspace(tmp / "probe", url).dataset(dataset).users)
    if args.ray_only:
        run_engine(tmp / "warm", url, experiment(dataset, users[:1], 1))
        return ray_figures(tmp, url, dataset, users[:8], args.rounds)
    run_engine(tmp / "warm", url, experiment(dataset, users[:1], 1))  # imports, first connections: not measured
    pilot = run_engine(tmp / "pilot", url, experiment(dataset, users[:2], 1))
    seq = pilot["wall"] * len(users) / 2
    calls_per_user = pilot["calls"] / 2
    print(f"{args.users} users × {len(METHODS)} methods ({', '.join(METHODS)}) × {args.sessions} sessions; "
          f"{calls_per_user:.0f} calls per user; latency {args.latency * 1000:.0f} ms")
    print(f"sequential (pilot of 2 users at concurrency 1, scaled): {seq:.1f} s "
          f"({pilot['wall']:.1f} s for {pilot['calls']} calls, {pilot['cpu'] / pilot['wall']:.2f} CPU cores)")
    cal = Calibration.load(pilot["ws"].runs, pilot["ws"].memory)
    print(f"{'conc.':>5} {'wall s':>7} {'speedup':>8} {'eff.':>5} {'calls/s':>8} {'CPU cores':>9} "
          f"{'est. calls':>10} {'used':>6} {'err':>6} {'est. tokens':>11} {'used':>8} {'err':>6}")
    first = None
    for level in [int(x) for x in args.levels.split(",")]:
        r = run_engine(tmp / f"c{level}", url, experiment(dataset, users, level), cal)
        first = first or (level, r)
        speedup = seq / r["wall"]
        est_tok, used_tok = r["est_tin"] + r["est_tout"], r["tin"] + r["tout"]
        print(f"{level:>5} {r['wall']:>7.1f} {speedup:>8.1f} {speedup / level:>5.2f} {r['calls'] / r['wall']:>8.1f} "
              f"{r['cpu'] / r['wall']:>9.2f} {r['est_calls']:>10.0f} {r['calls']:>6} "
              f"{100 * (r['est_calls'] / r['calls'] - 1):>+5.1f}% {est_tok:>11.0f} {used_tok:>8} "
              f"{100 * (est_tok / used_tok - 1):>+5.1f}%")
    assert first is not None, "no concurrency level given"
    level, r = first
    raw = run_raw(tmp / "raw", url, dataset, users, level)
    print(f"engine overhead over the same builds on a plain thread pool (concurrency {level}): "
          f"{100 * (r['wall'] / raw - 1):+.1f}% ({r['wall']:.1f} s vs {raw:.1f} s)")
    ideal = r["calls"] * args.latency / level
    print(f"engine wall over the calls' own latency at concurrency {level}: {100 * (r['wall'] / ideal - 1):+.1f}% "
          f"(ideal {ideal:.1f} s; includes the memory methods' own CPU work and the chains' tail)")
    if not args.no_ray:
        ray_figures(tmp, url, dataset, users[:8], args.rounds)
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


def ray_figures(tmp: Path, url: str, dataset: Path, users: list[str], rounds: int = 2) -> None:
    """Ray on this machine against threads: the same job at concurrency 8, alternated ``rounds`` times (the load
    of other processes drifts). The ≤ 10 % target compares the steady state — runs on the pool an earlier run of
    this process left warm, as the threads run in a process that has run units before. The fixed costs are shown
    beside it: Ray's own start, and a first run on a cold pool (its workers' start and warm-up timed apart, then
    the run, in which each worker still imports what the units first need, e.g. scikit-learn for H²Memory)."""
    try:
        import ray
    except ImportError:
        print("Ray: not installed (make ray)")
        return
    from studio.remote import ray_executor

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        started = time.perf_counter() - t0
        cold = run_engine(tmp / "r-cold", url, experiment(dataset, users, 8), executor=ray_executor)
        print(f"Ray local start {started:.1f} s; first run on a cold pool: {cold['warm']:.1f} s workers' start and "
              f"warm-up + {cold['wall']:.1f} s run")
        threads, rays = [], []
        for i in range(rounds):
            threads.append(run_engine(tmp / f"t8-{i}", url, experiment(dataset, users, 8)))
            rays.append(run_engine(tmp / f"r8-{i}", url, experiment(dataset, users, 8), executor=ray_executor))
            print(f"  round {i + 1}: threads {threads[-1]['wall']:.1f} s, Ray {rays[-1]['wall']:.1f} s "
                  f"(+ {rays[-1]['warm']:.2f} s taking over the warm pool); load {os.getloadavg()[0]:.2f}")
    finally:
        ray.shutdown()
    t, r = (sum(x["wall"] for x in runs) / rounds for runs in (threads, rays))
    print(f"Ray-local over threads, {len(users)} users × {len(METHODS)} methods at concurrency 8 (mean of {rounds}): "
          f"{100 * (r / t - 1):+.1f}% in the steady state, what the ≤ 10 % target compares "
          f"({r:.1f} s vs {t:.1f} s; calls {rays[-1]['calls']} vs {threads[-1]['calls']})")
    print(f"  a first run on a cold pool, its start and warm-up included: "
          f"{100 * ((cold['warm'] + cold['wall']) / t - 1):+.1f}% ({cold['warm'] + cold['wall']:.1f} s)")


if __name__ == "__main__":
    main()
