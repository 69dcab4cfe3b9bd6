"""The paper's whole protocol at the endpoint's speed: Mem-PAL's Table 11 protocol (h2memory, vanilla-log and rag-turn
against vanilla; build, dialogue and FairEval with k = 3) on PAL-Set-size filler users (10 sessions × 25 logs × 14
turns, 2 query sessions × 2 topics each) against a fake OpenAI-compatible endpoint with N slots answering after a
fixed latency (:mod:`testkit.slot_server`, its own process, so its CPU is not the app's).

Printed per user count: the calls the endpoint served (and the plan's estimate of them), wall time, the app's CPU per
call (this process's CPU seconds ÷ calls; "of it native": the part spent on Chroma's Rust workers, threads the
profile below cannot see), wall ÷ ideal (ideal = calls × latency ÷ slots: the endpoint busy all
the time; targets ≤ 1.2 at 0.2 s, ≤ 1.1 at 1 s), the process's resident memory per user, and the plan's wall
estimate beside the run. Then the top lines of a profile of the smallest size (``--profile``: each thread's own CPU
time, so a thread waiting for a lock, a socket or a slot costs nothing there), and the median time
of a claim on a planned 100-user Table 11 job (``--claims``; target ≤ 2 ms at 44,300 queued units). With ``--ray``
the smallest size also runs on a local Ray cluster of one node and of two (units per second of each beside
threads). The machine's load average is printed before and after: other processes share these cores, so compare
ratios, not seconds.

Run: ``.venv/bin/python bench/protocol_scale.py [--users 5,10,20] [--latency 0.2] [--slots 16] [--claims 100]
[--profile] [--ray]`` (minutes per size; temporary homes).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PAL_EMBEDDER"] = "hash"  # rag-turn embeds with the hash embedder: no model to load

from backends.llm import fanout  # noqa: E402
from palset.loader import load_dataset  # noqa: E402
from protocol.calibration import Calibration  # noqa: E402
from protocol.config import ExperimentConfig  # noqa: E402
from protocol.plan import make_plan  # noqa: E402
from studio.units import UnitEnv  # noqa: E402
from testkit.release import make_release  # noqa: E402
from testkit.slot_server import SlotServer, timeline_figures  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

METHODS = ["h2memory", "vanilla-log", "rag-turn"]
SHAPE = {"sessions": 10, "logs_per_session": 25, "turns": 14, "query_sessions": 2, "topics": 2}
# PAL-Set's own shape for the planned job claims are timed on: 29 sessions a user, 4 of them query sessions
CLAIM_SHAPE = {"sessions": 29, "logs_per_session": 10, "turns": 14, "query_sessions": 4, "topics": 2}


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def native_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads that name themselves, by name and id (Chroma's Rust workers:
    ``tokio-rt-worker``, ``sqlx-sqlite-wor``…): a profile of Python's threads cannot see them. Threads that keep the
    interpreter's name (Python's own, and native pools such as OpenBLAS's) are left out, as are threads that ended."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{task}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        if not name.startswith("python"):
            out[f"{name}/{task}"] = (int(fields[11]) + int(fields[12])) / tick
    return out


def timeline(url: str) -> list:
    """The slot server's requests since the last look (:meth:`testkit.slot_server.SlotServer.timeline`)."""
    return json.loads(urllib.request.urlopen(url.removesuffix("/v1") + "/timeline", timeout=30).read())


def served(url: str) -> int:
    """Requests the slot server has answered (its llama.cpp-style ``/metrics``)."""
    text = urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=10).read().decode()
    return int(next(line.split()[1] for line in text.splitlines() if line.startswith("llamacpp:requests_total")))


def workspace(home: Path, url: str, slots: int):
    env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": url, "PAL_DEFAULT_MODEL": "slot-model",
           "PAL_EMBEDDER": "hash"}
    return make_workspace(home, env=env, secrets={"cache": False, "limits": {url: {"concurrency": slots}}})


def experiment(dataset: Path, users: list[str], concurrency: int) -> ExperimentConfig:
    return ExperimentConfig(name="protocol-scale", dataset=str(dataset), users=users, methods=METHODS,
                            baseline="vanilla", tasks=["build", "dialogue", "faireval"], k=3, concurrency=concurrency)


def run_protocol(home: Path, url: str, dataset: Path, users: list[str], args, executor=None,
                 cal: Calibration | None = None) -> dict:
    """One whole protocol run; its figures."""
    ws = workspace(home, url, args.slots)
    exp = experiment(dataset, users, args.concurrency or 2 * args.slots)
    plan = make_plan(exp, ws.dataset(exp.dataset), ws.config, cal or Calibration.load(ws.runs, ws.memory, ws.jobs.store))
    ws.jobs.submit(plan.job, env=UnitEnv(ws, ws.llm(session_id="bench")))
    timeline(url)  # what came before is not this run's
    before, rss0, native0 = served(url), rss_mb(), native_cpu()
    cpu0, t0 = time.process_time(), time.perf_counter()
    summary = ws.jobs.run(plan.job.job_id, exp.concurrency, executor=executor(ws) if executor else None)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    native = sum(secs - native0.get(task, 0.0) for task, secs in native_cpu().items())
    calls = served(url) - before
    slots = timeline_figures(timeline(url), args.slots)
    limiter = ws.limiters.limiter(url)
    assert summary.status == "done", summary.errors
    with ws.db.read() as conn:  # when the last memory build ended: every later unit waits on some build
        builds = conn.execute("SELECT MAX(finished_at) - (SELECT MIN(started_at) FROM job_units WHERE job_id=?) "
                              "FROM job_units WHERE job_id=? AND kind='memory.session'",
                              (plan.job.job_id, plan.job.job_id)).fetchone()[0] or 0.0
    return {"wall": wall, "cpu": cpu, "native": native, "calls": calls, "recorded": ws.runs.totals().calls, "units": summary.total,
            "est_calls": plan.total("calls"), "est_wall": plan.wall_seconds, "rss": rss_mb(), "rss_gain": rss_mb() - rss0,
            "ideal": calls * args.latency / args.slots, "slots": slots, "builds": builds, "ws": ws,
            "slot_ms": 1000 * statistics.median(limiter.holds) if limiter and limiter.holds else 0.0,
            "handoff_ms": 1000 * statistics.median(limiter.handoffs) if limiter and limiter.handoffs else 0.0}


def profiled(fn):
    """``fn()`` with every thread it starts profiled on that thread's own CPU clock (a wall clock would count a
    thread's waits for locks, sockets and sleeps as the time of whatever function waited); (its result, the merged
    statistics, in CPU seconds)."""
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start(*_):
        sys.setprofile(None)
        p = cProfile.Profile(time.thread_time_ns, 1e-9)
        with lock:
            profiles.append(p)
        p.enable()

    # the fan-out helpers are kept for the process: started before the profile, they would go unprofiled
    fanout._POOL = fanout._Pool(fanout.POOL_THREADS)
    main = cProfile.Profile(time.thread_time_ns, 1e-9)
    threading.setprofile(start)
    main.enable()
    try:
        result = fn()
    finally:
        main.disable()
        threading.setprofile(None)
    stats = pstats.Stats(main)
    for p in profiles:
        try:
            stats.add(p)
        except TypeError:  # a thread's profiler that recorded nothing
            continue
    return result, stats


GROUPS = (("openai/httpx SDK", ("openai/", "httpx", "httpcore", "h11", "anyio", "ssl")), ("pydantic", ("pydantic",)),
          ("sqlite", ("sqlite3", "backends/store")), ("json", ("json/", "_json")), ("threading/queue", ("threading", "queue")),
          ("chroma", ("chromadb",)), ("memory methods", ("memory/",)), ("simulator", ("sim/",)),
          ("evaluation", ("evaluation/",)), ("llm client", ("backends/llm",)), ("jobs", ("jobs/",)))


WAITS = ("acquire", "sleep", "select", "poll", "wait", "recv", "recv_into", "accept", "join", "_wait_for_tstate_lock",
         "of '_queue.SimpleQueue'")


def print_profile(stats: pstats.Stats, calls: int, top: int = 15) -> None:
    """Own CPU time by part of the stack (waits — locks, sleeps, sockets, queues — left out: on the threads' CPU
    clocks they cost next to nothing, but their calls still carry the profiler's own clock reads), then the
    functions with the most own time."""
    table = stats.stats  # type: ignore[attr-defined]  # pstats keeps its table there
    for key in [k for k in table if k[0] == "~" and any(w in k[2] for w in WAITS)]:
        del table[key]
    by_group: dict[str, float] = defaultdict(float)
    total = 0.0
    for (file, _line, name), (_cc, _nc, tottime, _ct, _callers) in table.items():
        total += tottime
        where = name if file == "~" else file
        group = next((g for g, keys in GROUPS if any(k in where for k in keys)), "other")
        by_group[group] += tottime
    print(f"profile (own CPU time without waits; {total / max(calls, 1) * 1000:.1f} ms per call under the profiler):")
    for group, secs in sorted(by_group.items(), key=lambda kv: -kv[1]):
        print(f"  {group:<18} {100 * secs / total:5.1f} %")
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]  # where print_stats writes
    stats.sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    print("\n".join("  " + line for line in lines[start:start + top + 1]))


def print_slots(rows: list, latency: float) -> None:
    """Where wall ÷ ideal goes, from the endpoint's side: how busy its slots were, how long each call held one, and
    — from the app's side — how long a call held its limiter slot (the endpoint's hold plus the round trip and the
    app's own work on the call, on a busy machine also the waits for a core) and how long a waiter handed a freed slot
    took to run again; how long the run ran with fewer than half of them busy — before its last stretch (gaps) and in it (tail) — and
    when the last memory build ended (a user's build is a chain of sessions whose calls wait for slots like any other:
    with few users it is as long as the rest of the run, and the sims and judgments after it run with slots idle)."""
    print("the endpoint's slots over each run (its own timeline):")
    print(f"{'users':>5} {'busy':>6} {'in flight':>9} {'hold ms':>8} {'slot ms':>8} {'handoff ms':>10} {'queued ms':>9} "
          f"{'gaps s':>7} {'tail s':>7} {'builds end s':>12} {'wall s':>7}")
    for n, f, builds, wall, slot_ms, handoff_ms in rows:
        print(f"{n:>5} {100 * f.busy_share:>5.0f}% {f.mean_in_flight:>9.1f} {f.hold_ms:>8.0f} {slot_ms:>8.0f} "
              f"{handoff_ms:>10.1f} {f.queued_ms:>9.1f} {f.gaps_s:>7.1f} {f.tail_s:>7.1f} {builds:>12.1f} {wall:>7.1f}")
    print(f"  (hold: the {latency * 1000:.0f} ms latency plus the fake's own work on the request; slot: the app's limiter "
          f"slot per call, medians)")


def claim_figures(tmp: Path, url: str, users: int, samples: int = 200) -> None:
    """Median claim on a planned Table 11 job of ``users`` filler users (every method of the paper's table)."""
    from protocol.config import load_experiment

    dataset = make_release(tmp / "claims-ds", users=users, **CLAIM_SHAPE)
    ws = workspace(tmp / "claims", url, 16)
    exp = load_experiment(ROOT / "experiments" / "table11-palset-en.toml").model_copy(
        update={"dataset": str(dataset), "roles": {}, "limits": {}})
    plan = make_plan(exp, load_dataset(dataset), ws.config, Calibration.load(ws.runs, ws.memory, ws.jobs.store))
    t0 = time.perf_counter()
    ws.jobs.submit(plan.job)
    submit = time.perf_counter() - t0
    took = []
    for i in range(samples):
        t0 = time.perf_counter()
        unit = ws.jobs.store.claim(f"bench:1:{i}", 60, job_id=plan.job.job_id if i % 2 else None)
        took.append(time.perf_counter() - t0)
        assert unit is not None
        ws.jobs.store.finish(unit.unit_id, f"bench:1:{i}", None, 0.0)
    print(f"claims on a planned {users}-user Table 11 job ({len(plan.job.units):,} units queued; submitted in "
          f"{submit:.1f} s): median {statistics.median(took) * 1000:.2f} ms, p95 "
          f"{sorted(took)[int(0.95 * len(took))] * 1000:.2f} ms over {samples} claims (target ≤ 2 ms)")


def ray_figures(tmp: Path, url: str, dataset: Path, users: list[str], args, threads: dict) -> None:
    """The smallest size on a local Ray cluster of one node, then of two (``ray start``), beside threads."""
    try:
        import ray
    except ImportError:
        print("Ray: not installed (make ray)")
        return
    from studio.remote import ray_executor
    from testkit.ray_cluster import local_cluster

    for nodes in (1, 2):
        with local_cluster(nodes, cpus=4, timeout=600) as address:  # 16 units at once per node at a quarter CPU each
            os.environ["RAY_ADDRESS"] = address
            try:
                r = run_protocol(tmp / f"ray{nodes}", url, dataset, users, args, executor=ray_executor)
            finally:
                os.environ.pop("RAY_ADDRESS", None)
                import ray

                ray.shutdown()
        print(f"Ray, {nodes} node(s): {r['units'] / r['wall']:.2f} units/s, wall {r['wall']:.1f} s, "
              f"wall ÷ ideal {r['wall'] / r['ideal']:.2f} (threads: {threads['units'] / threads['wall']:.2f} units/s, "
              f"{threads['wall'] / threads['ideal']:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", default="5,10,20")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=0, help="units at once (default: twice the slots)")
    parser.add_argument("--claims", type=int, default=100, help="users of the planned job claims are timed on (0: skip)")
    parser.add_argument("--profile", action="store_true", help="profile the smallest size once more")
    parser.add_argument("--profile-out", help="also write the profile's statistics here (pstats format)")
    parser.add_argument("--ray", action="store_true", help="the smallest size on Ray, one node and two")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pal-protocol-bench-"))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (cores: {os.cpu_count()})")
    url = SlotServer.in_process(args.latency, args.slots)
    sizes = [int(x) for x in args.users.split(",") if x]
    dataset = make_release(tmp / "ds", users=max(sizes), **SHAPE)
    users = sorted(load_dataset(dataset).users)
    run_protocol(tmp / "warm", url, dataset, users[:1], args)  # imports, first connections: not measured
    pilot = run_protocol(tmp / "pilot", url, dataset, users[:1], args)
    cal = Calibration.load(pilot["ws"].runs, pilot["ws"].memory, pilot["ws"].jobs.store)
    print(f"{', '.join(METHODS)} vs vanilla; build, dialogue, FairEval k=3; {args.slots} slots, "
          f"{args.latency * 1000:.0f} ms a call, {args.concurrency or 2 * args.slots} units at once")
    print(f"{'users':>5} {'calls':>7} {'planned':>8} {'wall s':>7} {'plan s':>7} {'ms CPU/call':>11} {'of it native':>12} "
          f"{'wall/ideal':>10} {'RSS MB':>7} {'MB/user':>7}")
    smallest, rows = None, []
    for n in sizes:
        r = run_protocol(tmp / f"u{n}", url, dataset, users[:n], args, cal=cal)
        smallest = smallest or r
        print(f"{n:>5} {r['calls']:>7} {r['est_calls']:>8.0f} {r['wall']:>7.1f} {r['est_wall']:>7.1f} "
              f"{1000 * r['cpu'] / r['calls']:>11.1f} {1000 * r['native'] / r['calls']:>12.1f} "
              f"{r['wall'] / r['ideal']:>10.2f} {r['rss']:>7.0f} "
              f"{r['rss_gain'] / n:>7.1f}", flush=True)
        rows.append((n, r["slots"], r["builds"], r["wall"], r["slot_ms"], r["handoff_ms"]))
        r.pop("ws").jobs.stop()
    print_slots(rows, args.latency)
    if args.profile:
        n = sizes[0]
        r, stats = profiled(lambda: run_protocol(tmp / "profiled", url, dataset, users[:n], args, cal=cal))
        if args.profile_out:
            stats.dump_stats(args.profile_out)
        print_profile(stats, r["calls"])
    if args.claims:
        claim_figures(tmp, url, args.claims)
    if args.ray and smallest is not None:
        ray_figures(tmp, url, dataset, users[:sizes[0]], args, smallest)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
