"""Model work at the speed of the server: how close PAL Studio's long work comes to what the server can do.

Four pieces of real work, each against the bundled llama.cpp server and against a fake server with N slots and
a fixed latency per call (:mod:`testkit.slot_server`): an H²Memory build of one demo user, one synthesis month
(a new synthetic user over one month), one 12-turn simulation (memory: the gold memory) and one FairEval judgment
(k = 3, both orders; the simulated run against the session's own dialogue). Per piece:

* wall seconds, calls, prompt tokens the server processed and served from its prompt cache, output tokens;
* each slot's busy share (the server's ``/slots`` polled);
* the LIMIT: the time the server needs for exactly those tokens with every slot busy — bundled: processed prompt
  tokens ÷ prompt rate + output tokens ÷ decode rate, both rates measured right after the piece with every slot
  busy at the piece's own mean prompt length (calibration requests of the server's own, :func:`calibrate`); the
  rates at a short prompt (measured before and after the piece, for the machine's drift) and the LIMIT they give
  are printed beside it; fake: calls × latency ÷ slots;
* wall ÷ limit.

The figures are the server's own (llama.cpp ``timings`` / OpenAI-style ``usage.prompt_tokens_details``, read by a
recording proxy in front of the server: :mod:`testkit.tap`), so they do not depend on what the client records.
Targets (bundled default model, quiet 2-core machine): wall ÷ limit ≤ 1.25 for the build and the month;
≥ 60 % of prompt tokens from the cache in the simulation, ≥ 40 % in the build; fake 8 slots × 200 ms: the judgment
≤ 2 × 200 ms.

    .venv/bin/python bench/model_throughput.py                      # both servers, every piece
    .venv/bin/python bench/model_throughput.py --servers fake --slots 8 --latency 0.2
    .venv/bin/python bench/model_throughput.py --servers bundled --model /path/to/model.gguf --only build,sim
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from evaluation.faireval_prompts import PROMPT_SETS  # noqa: E402
from palset.dataset import Dataset  # noqa: E402
from palset.loader import load_dataset  # noqa: E402
from palset.vocab import Act  # noqa: E402
from studio.workspace import Workspace  # noqa: E402
from testkit.slot_server import SlotServer  # noqa: E402
from testkit.tap import Tap  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

log = logging.getLogger("bench.model_throughput")
PIECES = ("build", "synth", "sim", "judge")
TI, RC, SD, SF = Act.TOPIC_INQUIRY, Act.REQUIREMENT_CONFIRMATION, Act.SOLUTION_DISCUSSION, Act.SOLUTION_FEEDBACK
RP, SP, FR = Act.REQUIREMENT_PREDICTION, Act.SOLUTION_PROPOSAL, Act.FEEDBACK_RESPONSE
TWELVE_TURNS = [(TI, RP), (RC, RP), (RC, SP), (SD, SD), (SD, SD), (SF, SP), (SD, SD), (SD, SD), (SF, SP), (SD, SD),
                (SF, SP), (SF, FR)]


@dataclass
class Server:
    label: str
    ws: Workspace
    tap: str  # the recording proxy's root URL
    upstream: str  # the server's own root URL (calibration requests go there, unrecorded)
    slots: int
    latency: float | None = None  # the fake's seconds per call
    state: dict[str, Any] = field(default_factory=dict)

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.tap}/_tap/{path}", timeout=30) as r:
            return json.load(r)


def bundled(home: Path, model: str | None, embedder: str) -> Server:
    """The workspace's own local server for ``model`` (a GGUF file, or the name of an installed model; None: the
    configured default), reached through a tap."""
    env = {"PAL_EMBEDDER": embedder, "PAL_DEFAULT_TIMEOUT": "900"}
    secrets: dict[str, Any] = {}
    if model and Path(model).is_file():
        secrets["local"] = {"model_path": model}
    if model:
        env["PAL_DEFAULT_MODEL"] = model
    ws = make_workspace(home, secrets=secrets, env=env)
    server = ws.llm().provider("memory_builder").server  # the bundled provider's server, as every role uses it
    server.ensure()
    upstream = f"http://127.0.0.1:{server.port}"
    tap = Tap.in_process(upstream, poll_s=0.2)
    server.port = int(tap.rsplit(":", 1)[1])  # the workspace's clients now reach the server through the tap
    return Server(f"bundled {server.alias} ({ws.config.local.parallel} slots, {ws.config.local.threads} threads)",
                  ws, tap, upstream, ws.config.local.parallel)


def fake(home: Path, slots: int, latency: float, embedder: str) -> Server:
    base = SlotServer.in_process(latency, slots)
    upstream = base.removesuffix("/v1")
    tap = Tap.in_process(upstream, poll_s=min(0.05, latency / 4))
    ws = make_workspace(home, secrets={"limits": {f"{tap}/v1": {"concurrency": slots}}}, env={
        "PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": f"{tap}/v1", "PAL_DEFAULT_MODEL": "slot-model",
        "PAL_EMBEDDER": embedder})
    return Server(f"fake {slots} slots x {latency * 1000:.0f} ms", ws, tap, upstream, slots, latency)


# ---------------------------------------------------------------------------------------------- rates


def _post(root: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(f"{root}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as r:
        return json.load(r)


def _all_at_once(root: str, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{} for _ in bodies]

    def one(i: int) -> None:
        out[i] = _post(root, bodies[i]).get("timings") or {}

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


PLAIN_CONTEXT = 343  # tokens: the short prompt of the plain rates (300 words of the text below)


def calibrate(server: Server, context: int = PLAIN_CONTEXT) -> tuple[float, float]:
    """(prompt tokens/s, output tokens/s) of the llama.cpp server with every slot busy, at ``context`` tokens of
    prompt: one fresh prompt of that length per slot at once (1 output token: the prompt rate, by wall time — a
    slot's own timings undercount when slots share batches), then the same prompts again, kept in their slots,
    each decoding 48 tokens at once (the decode rate, no prompt work mixed in). On a CPU a token decoded after
    1,000 tokens of context costs more than one after a few, so the LIMIT uses the rates at the piece's own mean
    prompt length."""
    rng = random.Random(time.time_ns())
    words = "time sleep work family walk dinner train music garden doctor report friend weekend coffee".split()
    prompts = [f"{rng.random():.12f} " + " ".join(rng.choice(words) for _ in range(int(context / 1.15)))
               for _ in range(server.slots)]  # ~1.15 tokens per word of this text on Qwen2.5
    started = time.perf_counter()
    prefill = _all_at_once(server.upstream, [{"messages": [{"role": "user", "content": p}], "max_tokens": 1,
                                              "cache_prompt": True} for p in prompts])
    prefill_s = time.perf_counter() - started
    decode = _all_at_once(server.upstream, [{"messages": [{"role": "user", "content": p}], "max_tokens": 48,
                                             "ignore_eos": True, "cache_prompt": True} for p in prompts])
    return (sum(t["prompt_n"] for t in prefill) / prefill_s,
            sum(t["predicted_n"] for t in decode) / (max(t["predicted_ms"] for t in decode) / 1000))


# ---------------------------------------------------------------------------------------------- the pieces


def piece_build(server: Server, dataset: Dataset, args: argparse.Namespace) -> tuple[Callable[[], str], str]:
    builder = server.ws.open_builder(dataset, args.user, "h2memory", fresh=True)
    builder.embedder.embed_documents(["warm-up"])  # loading the embedder is not part of the figures

    until = args.sessions - 1 if args.sessions else None

    def run() -> str:
        info = builder.run(until_session=until)
        return f"{info.stages_done} stages"

    scope = f", its first {args.sessions} sessions" if args.sessions else ""
    return run, f"H2Memory build of user {args.user}{scope}"


def piece_synth(server: Server, dataset: Dataset, args: argparse.Namespace) -> tuple[Callable[[], str], str]:
    from synth.config import SynthConfig
    from synth.pipeline import Pipeline

    out = tempfile.mkdtemp(prefix="synth-bench-")
    (smin, smax), (lmin, lmax) = (tuple(int(x) for x in r.split("-")) for r in (args.synth_situations, args.synth_logs))
    config = SynthConfig(lang="en", months=1, seed=args.seed, situations_min=smin, situations_max=smax, min_logs=lmin,
                         max_logs=lmax)
    pipe = Pipeline.create(config, out, server.ws.synth, llm=server.ws.llm())

    def run() -> str:
        info = pipe.run()
        return f"{info.status}" + (f" ({(info.error or '')[:80]})" if info.error else "")

    return run, f"synthesis month (1 month, en, {args.synth_situations} situations, {args.synth_logs} logs each)"


def _sim_spec(dataset: Dataset, args: argparse.Namespace):
    from sim.service import make_spec

    user = dataset.users[args.user]
    session = next(s for s in user.sessions if s.split == "query" and s.topics)
    return make_spec(dataset, args.user, session.sample_id, session.topics[0].key, args.sim_method,
                     seed=f"bench-{args.seed}-{time.time_ns()}")


def piece_sim(server: Server, dataset: Dataset, args: argparse.Namespace) -> tuple[Callable[[], str], str]:
    from sim.store import run_id_for
    from sim.types import RunRecord

    spec = _sim_spec(dataset, args)
    if args.sim_method != "vanilla":
        builder = server.ws.open_builder(dataset, args.user, args.sim_method)
        builder.run()  # the memory and its index: not part of the figures
        builder.ensure_index()
    server.ws.sims.create(RunRecord(run_id=run_id_for(spec), spec=spec, schedule=TWELVE_TURNS,
                                    schedule_source="bench: 12 turns"))
    sim = server.ws.open_simulation(dataset, spec, server.ws.llm())

    def run() -> str:
        record = sim.run()
        server.state["run"] = record
        return f"{record.status}, {len(record.utterances)} utterances" + (f" ({record.error[:80]})" if record.error else "")

    return run, f"12-turn simulation ({args.sim_method} memory)"


def piece_judge(server: Server, dataset: Dataset, args: argparse.Namespace) -> tuple[Callable[[], str], str]:
    from evaluation.faireval import judge_pair
    from evaluation.service import topic_context
    from sim.types import RunRecord, Utterance

    if "run" not in server.state:
        piece_sim(server, dataset, args)[0]()
    run_a: RunRecord = server.state["run"]
    session = dataset.users[args.user].session(run_a.spec.sample_id)
    utterances = [Utterance(turn_no=t, side=side, actor="human", act=act, content=text)  # the session's own dialogue
                  for t, (turn, acts) in enumerate(zip(session.turns, TWELVE_TURNS), 1)
                  for side, act, text in (("user", acts[0], turn.user.content), ("assistant", acts[1], turn.assistant.content))]
    run_b = RunRecord(run_id=f"dataset-{session.sample_id}", spec=run_a.spec.model_copy(update={"method": "dataset"}),
                      status="finished", utterances=utterances)
    ctx = topic_context(dataset, args.user, run_a.spec.sample_id, run_a.spec.topic_key)
    llm = server.ws.llm().for_run(f"bench-judge-{time.time_ns()}")

    if server.latency is not None:  # one sample alone first: one call's latency on this path (not in the figures)
        from backends.prompts import load_prompt
        from evaluation.faireval import ask_judge, judge_messages, render_dialogue

        prompt = load_prompt("eval/faireval_requirement")
        started = time.perf_counter()
        ask_judge(llm, prompt, judge_messages(prompt, ctx, "requirement", render_dialogue(run_a), render_dialogue(run_b)),
                  1, 99, "requirement")
        server.state["one_call"] = time.perf_counter() - started

    def run() -> str:
        j = judge_pair(llm, ctx, run_a, run_b, "requirement", k=3, prompts=args.judge_prompts)
        one = server.state.get("one_call")
        why = next((s.errors[-1] for s in j.samples if not s.ok and s.errors), None)  # e.g. a prompt past the window
        return (f"{j.decision}, {len(j.samples) - j.invalid}/{len(j.samples)} valid samples, prompt {j.prompt_name}"
                + (f"; one call alone on this path took {one:.2f} s" if one else "")
                + (f"; an invalid sample: {why}" if why else ""))

    return run, "FairEval judgment (requirement, k=3, both orders)"


BUILDERS = {"build": piece_build, "synth": piece_synth, "sim": piece_sim, "judge": piece_judge}


# ---------------------------------------------------------------------------------------------- figures


def measure(server: Server, piece: str, dataset: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    run, title = BUILDERS[piece](server, dataset, args)
    rates = calibrate(server) if server.latency is None else None
    before = len(server.get("records"))
    metrics_before = server_metrics(server)
    started, t0 = time.perf_counter(), time.time()
    try:
        outcome = run()
    except Exception as e:  # a piece that fails still has its figures up to the failure
        log.exception("%s on %s failed", piece, server.label)
        outcome = f"error: {type(e).__name__}: {str(e)[:100]}"
    wall, t1 = time.perf_counter() - started, time.time()
    if rates is not None:  # the load of a shared machine drifts: the rates before and after the piece, averaged
        after = calibrate(server)
        rates = ((rates[0] + after[0]) / 2, (rates[1] + after[1]) / 2, rates, after)
    records = [r for r in server.get("records")[before:] if r["status"] == 200]
    samples = [s for t, s in server.get("slots") if t0 <= t <= t1]
    total = sum((r.get("prompt_n") or 0) + (r.get("cache_n") or 0) if "prompt_n" in r else (r.get("prompt_tokens") or 0)
                for r in records)
    cached = sum(r.get("cache_n") if "cache_n" in r else (r.get("cached_tokens") or 0) for r in records)
    out = sum(r.get("predicted_n") if "predicted_n" in r else (r.get("completion_tokens") or 0) for r in records)
    busy = [sum(s[i] for s in samples) / len(samples) for i in range(len(samples[0]))] if samples else []
    shaped = None
    if rates is not None:
        plain_limit = (total - cached) / rates[0] + out / rates[1]
        shaped = calibrate(server, context=total // max(len(records), 1))  # the rates at the piece's context
        limit = (total - cached) / shaped[0] + out / shaped[1]
    else:
        plain_limit = limit = len(records) * (server.latency or 0) / server.slots
    metrics = {k: v - metrics_before.get(k, 0.0) for k, v in server_metrics(server).items()}
    timed = [r for r in records if r.get("predicted_ms")]
    per_request = sum(r["predicted_n"] for r in timed) / (sum(r["predicted_ms"] for r in timed) / 1000) if timed else None
    return {"piece": title, "outcome": outcome, "wall": wall, "calls": len(records), "prompt": total,
            "cached": cached, "out": out, "busy": busy, "limit": limit, "rates": rates, "metrics": metrics,
            "shaped": shaped, "plain_limit": plain_limit,
            "client": client_records(server.ws, t0, t1), "decode_per_request": per_request}


def server_metrics(server: Server) -> dict[str, float]:
    """The server's ``/metrics`` counters (llama.cpp: prompt tokens computed, tokens predicted), {} without them."""
    try:
        with urllib.request.urlopen(f"{server.upstream}/metrics", timeout=30) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name.endswith(("prompt_tokens_total", "tokens_predicted_total")) and not line.startswith("#"):
            out[name.split(":")[-1]] = float(value)
    return out


def client_records(ws: Workspace, t0: float, t1: float) -> str:
    """What PAL Studio itself recorded of the piece's calls (llm_calls), for comparison with the server's figures."""
    try:
        with ws.db.read() as conn:
            n, tin, cached, reported = conn.execute(
                "SELECT COUNT(*), SUM(tokens_in), SUM(tokens_cached), SUM(CASE WHEN tokens_cached IS NOT NULL THEN "
                "tokens_in END) FROM llm_calls WHERE ts BETWEEN ? AND ? AND cache_hit = 0", (t0, t1 + 1)).fetchone()
    except sqlite3.OperationalError:  # a run store without the cached-token columns
        return ""
    return f"recorded by PAL Studio: {n} calls, {tin or 0:,} prompt tokens, {cached or 0:,} of {reported or 0:,} " \
           "reported as served from the server's cache"


def show(server: Server, fig: dict[str, Any]) -> None:
    share = fig["cached"] / fig["prompt"] if fig["prompt"] else 0.0
    rates = f" at {fig['shaped'][0]:.0f} prompt tok/s, {fig['shaped'][1]:.1f} output tok/s (all slots busy, at the " \
            f"piece's mean prompt of {fig['prompt'] // max(fig['calls'], 1):,} tokens; at {PLAIN_CONTEXT} tokens " \
            f"{fig['rates'][0]:.0f}/{fig['rates'][1]:.1f} — before {fig['rates'][2][0]:.0f}/{fig['rates'][2][1]:.1f}, " \
            f"after {fig['rates'][3][0]:.0f}/{fig['rates'][3][1]:.1f} — give a LIMIT of {fig['plain_limit']:.1f} s, " \
            f"wall / that {fig['wall'] / fig['plain_limit'] if fig['plain_limit'] else float('nan'):.2f})" \
        if fig["rates"] else f" = calls x {server.latency:.3f} s / {server.slots} slots"
    busy = " ".join(f"{b:.0%}" for b in fig["busy"]) or "n/a"
    ratio = fig["wall"] / fig["limit"] if fig["limit"] else float("nan")
    print(f"  {fig['piece']}: {fig['outcome']}\n"
          f"    wall {fig['wall']:.1f} s · {fig['calls']} calls · prompt tokens {fig['prompt']:,} "
          f"(processed {fig['prompt'] - fig['cached']:,}, from cache {fig['cached']:,} = {share:.0%}) · "
          f"output tokens {fig['out']:,}\n"
          f"    slots busy: {busy} · LIMIT {fig['limit']:.1f} s{rates} · wall / limit {ratio:.2f}", flush=True)
    if fig["rates"] and fig["decode_per_request"]:
        print(f"    output tok/s per request: {fig['decode_per_request']:.1f} in the piece (the server's timings), "
              f"{fig['shaped'][1] / server.slots:.1f} in the calibration at the piece's prompt length, "
              f"{fig['rates'][1] / server.slots:.1f} at {PLAIN_CONTEXT} tokens")
    if fig["metrics"]:
        print("    server /metrics: " + ", ".join(f"{k} +{v:,.0f}" for k, v in sorted(fig["metrics"].items())))
    if fig["client"]:
        print(f"    {fig['client']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="fake,bundled", help="fake, bundled or both (comma-separated)")
    ap.add_argument("--only", default=",".join(PIECES), help=f"pieces to run: {', '.join(PIECES)}")
    ap.add_argument("--model", help="GGUF file for the bundled server (default: the installed bundled model)")
    ap.add_argument("--user", default="1002", help="demo user (data/demo)")
    ap.add_argument("--slots", type=int, default=8, help="fake server: slots")
    ap.add_argument("--latency", type=float, default=0.2, help="fake server: seconds per call")
    ap.add_argument("--sessions", type=int, help="build only the user's first N sessions (default: all)")
    ap.add_argument("--synth-situations", default="4-6", help="synthesis month: situations (min-max; spec: 4-6)")
    ap.add_argument("--synth-logs", default="15-25", help="synthesis month: logs per situation (min-max; spec 15+)")
    ap.add_argument("--sim-method", default="gold", help="the simulated assistant's memory method")
    ap.add_argument("--embedder", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--judge-prompts", choices=sorted(PROMPT_SETS), help="the judgment's prompt set (default: the "
                    "authors'; on a 4,096-token slot it does not fit two 12-turn dialogues, the compact one does)")
    args = ap.parse_args()
    dataset = load_dataset(ROOT / "data" / "demo")
    pieces = [p for p in args.only.split(",") if p]
    for kind in [s for s in args.servers.split(",") if s]:
        home = Path(tempfile.mkdtemp(prefix=f"pal-bench-{kind}-"))
        server = fake(home, args.slots, args.latency, args.embedder) if kind == "fake" else \
            bundled(home, args.model, args.embedder)
        print(f"== {server.label} (home {home})", flush=True)
        try:
            for piece in pieces:
                show(server, measure(server, piece, dataset, args))
        finally:
            server.ws.close()


if __name__ == "__main__":
    main()
