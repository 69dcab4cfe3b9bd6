"""Live chat latency: time to the first streamed token and to the whole turn, per side, for a 12-utterance simulation
driven exactly as the Simulate page drives it (``Simulation.step(on_token=…)``).

For each utterance: seconds until the turn shows something (a retrieval method's assistant streams its memory-search
query first, as the Simulate page shows it), seconds to the reply's first token (the User-LLM in fixed mode streams
plain text; the assistant's includes its query summary and retrieval when the method has them), seconds to the
end of the turn, the query summary's own call (seconds, tokens written), tries (a User-LLM turn that fails ``sim.persona_check`` is asked again), and how much of the prompt is the previous call's
prompt of the same role (its longest common prefix in characters: what the server's prompt cache can keep — the
bundled llama.cpp server caches prompts, ``cache_prompt``) and how many prompt tokens the server actually read (its
calls' prompt tokens less those it served from its cache, as the call records keep them). Then p50/p95 per side, and the load average beside
them (the target, start streaming within 3 s and finish at p50 <= 8 s for the default model, is for a quiet
2-core machine).

Run: ``nice -n 10 .venv/bin/python bench/live_chat.py [--model qwen2.5-coder-0.5b] [--method rag-turn] [--user 1002]``
(a temporary PAL_HOME; about 5–15 minutes on a busy 2-core machine with the default model).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PAL_HOME", tempfile.mkdtemp(prefix="pal-live-"))

from backends.llm.client import LLMClient  # noqa: E402
from backends.local_models import find_model  # noqa: E402
from palset.loader import load_dataset  # noqa: E402
from sim.service import make_spec  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

PROMPTS: dict[str, str] = {}  # role → the previous call's prompt (all its messages, flattened)
REUSE: list[tuple[str, int, int]] = []  # (role, prompt chars, chars shared with the previous call of the role)


def _watch_prompts() -> None:
    """Note, for every chat/stream/structured call, how much of its prompt the role's previous call already sent."""
    def note(role: str, messages) -> None:
        text = "".join(f"<{m['role'] if isinstance(m, dict) else m.role}>"
                       f"{m['content'] if isinstance(m, dict) else m.content}" for m in messages)
        before = PROMPTS.get(role, "")
        shared = len(os.path.commonprefix([before, text]))
        REUSE.append((role, len(text), shared))
        PROMPTS[role] = text

    for name in ("chat", "stream", "structured"):
        original = getattr(LLMClient, name)

        def wrapped(self, role, messages, *a, _original=original, **kw):  # type: ignore[no-untyped-def]  # a timing wrapper around any client method
            note(role, messages)
            return _original(self, role, messages, *a, **kw)

        setattr(LLMClient, name, wrapped)


def stamper(*marks: list[float]) -> Callable[[str], None]:
    """An ``on_token``/``on_query`` callback noting the time of the first token in each of ``marks`` still empty."""
    def seen(_token: str) -> None:
        for mark in marks:
            mark or mark.append(time.perf_counter())
    return seen


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))] if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--method", default="rag-turn", help="the assistant's memory method (rag-turn: the query is "
                                                             "summarised before each turn; vanilla-log: a fixed memory)")
    parser.add_argument("--user", default="1002")
    parser.add_argument("--sample", default="", help="query session (default: the user's first)")
    parser.add_argument("--topic", default="topic-1")
    parser.add_argument("--utterances", type=int, default=12)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mode", choices=("fixed", "free"), default="fixed")
    args = parser.parse_args()
    model = find_model(args.model)
    if model is None:
        raise SystemExit(f"unknown model {args.model!r}")
    _watch_prompts()
    dataset = load_dataset(ROOT / "data" / "demo")
    user = dataset.users[args.user]
    sample = args.sample or user.query[0].sample_id
    home = Path(os.environ["PAL_HOME"])
    ws = make_workspace(home, secrets={"local": {"threads": args.threads}, "cache": False},
                        env={"PAL_DEFAULT_MODEL": model.name, "PAL_EMBEDDER": "auto", "PAL_DEFAULT_TIMEOUT": "900"})
    llm = ws.llm(session_id="live-chat")
    builder = ws.open_builder(dataset, args.user, args.method, llm=llm) if args.method != "vanilla" else None
    if builder is not None:
        builder.run()
    spec = make_spec(dataset, args.user, sample, args.topic, args.method, mode=args.mode,
                     seed=f"live-{time.time_ns()}", max_turns=max(1, args.utterances // 2))
    sim = ws.open_simulation(dataset, spec, llm, builder=builder)
    llm.chat("user_simulator", [{"role": "user", "content": "Say OK."}], max_tokens=2)  # the server is up
    load = os.getloadavg()
    print(f"{model.name}, {args.method}, user {args.user} {sample} {args.topic}, {args.mode} mode; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)
    rows = []
    while len(rows) < args.utterances and sim.next_slot() is not None:
        turn, side, act = sim.next_slot()  # type: ignore[misc]  # the bench stops before the run ends, so a slot is left
        first: list[float] = []
        shown: list[float] = []  # the first token of anything the page draws: the query, else the reply
        calls_before = len(REUSE)
        last_call = max((c["id"] for c in llm.store.calls(session_id="live-chat", limit=1)), default=0)
        started = time.perf_counter()
        utt = sim.step(on_token=stamper(first, shown), on_query=stamper(shown))
        total = time.perf_counter() - started
        if utt is None:
            break
        ttft = (first[0] - started) if first else total
        shows = (shown[0] - started) if shown else total
        calls = REUSE[calls_before:]
        reused = sum(s for _, _, s in calls) / max(sum(n for _, n, _ in calls), 1)
        recorded = [c for c in llm.store.calls(session_id="live-chat", limit=50) if c["id"] > last_call]
        processed = sum(c["tokens_processed"] if c["tokens_processed"] is not None else (c["tokens_in"] or 0)
                        for c in recorded)
        query = [c for c in recorded if c["prompt_name"] == "sim/query_summary"]
        rows.append({"side": side, "ttft": ttft, "shows": shows, "total": total, "tries": utt.attempts,
                     "reused": reused, "calls": len(calls), "processed": processed})
        asked = (f"query {sum(c['latency_ms'] for c in query) / 1000:4.1f} s/{sum(c['tokens_out'] for c in query)} tok  "
                 if query else "")
        print(f"  turn {turn} {side:9} {act.value:24} shows {shows:5.1f} s  first token {ttft:5.1f} s  "
              f"done {total:5.1f} s  {asked}x{utt.attempts}  prompt from the previous call {reused:4.0%}  prompt tokens read {processed:5,}  "
              f"{'(composed) ' if utt.composed else ''}{utt.content[:70]!r}", flush=True)
    end_load = os.getloadavg()
    print(f"\n{'side':9} {'n':>3} {'shows p50':>10} {'first token p50':>16} {'p95':>6} {'turn p50':>9} {'p95':>6} "
          f"{'prompt reused':>14} {'tokens read p50':>16}")
    for side in ("user", "assistant"):
        mine = [r for r in rows if r["side"] == side]
        if not mine:
            continue
        ttft, total = [r["ttft"] for r in mine], [r["total"] for r in mine]
        reused = statistics.mean(r["reused"] for r in mine[1:]) if len(mine) > 1 else 0.0
        shows = [r["shows"] for r in mine]
        print(f"{side:9} {len(mine):>3} {pct(shows, .5):>8.1f} s {pct(ttft, .5):>14.1f} s {pct(ttft, .95):>5.1f}s "
              f"{pct(total, .5):>7.1f} s {pct(total, .95):>5.1f}s {reused:>13.0%} {pct([r['processed'] for r in mine], .5):>16,.0f}")
    print(f"load average at the end {end_load[0]:.1f} {end_load[1]:.1f} {end_load[2]:.1f} "
          "(targets, quiet 2-core machine, default model: a turn streams within 3 s, turn p50 <= 8 s)")
    ws.close()


if __name__ == "__main__":
    main()
