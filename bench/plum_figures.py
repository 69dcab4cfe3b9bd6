"""PLUM figures: training time per session on CPU, adapter size, and accuracy before/after on the user's own
QA pairs and on held-out yes/no questions (the paper's knowledge-boundary probe).

Run: ``.venv/bin/python bench/plum_figures.py [--user 1000] [--sessions 3] [--qa dataset|local]``.
``--qa dataset`` (default, deterministic) writes the QA pairs from the dataset itself, through the same
method and prompts (a scripted ``memory_builder``): one positive per session topic — "What did I need
help with about <requirement type>?" → the gold requirement in the second person — and negative topics
taken from another user's requirement types. ``--qa local`` asks the bundled local model instead (slow).
Held out: "Have we ever discussed <topic>?" for trained positive topics (gold yes), trained negative
topics (gold no) and never-seen topics of a third user (gold no); an answer counts as yes/no by its words.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def second_person(text: str) -> str:
    first = re.split(r"(?<=[.!?])\s", text.strip())[0]
    return re.sub(r"^The user (\w+)", lambda m: "You " + {"wants": "wanted", "needs": "needed"}.get(m.group(1), m.group(1)),
                  first)[:280]


def dataset_qa(user, other_topics: list[str]):
    """A scripted ``memory_builder`` answering PLUM's two prompts from the dataset (deterministic)."""
    by_date = {f"{s.dialogue_timestamp:%Y-%m-%d}": s for s in user.sessions}
    negatives = iter(other_topics)

    def reply(req) -> str:
        prompt = next(m.content for m in req.messages if m.role == "user")
        session = by_date[re.search(r"Conversation of (\d{4}-\d{2}-\d{2})", prompt).group(1)]
        if "NOT mentioned" in prompt:
            return json.dumps({"topics": [next(negatives) for _ in session.topics]})
        return json.dumps({"pairs": [{"topic": t.requirement_type, "question":
                                      f"What did I need help with about {t.requirement_type.lower()}?",
                                      "answer": second_person(t.topic.requirement)} for t in session.topics]})

    return reply


def f1(pred: str, gold: str) -> float:
    p, g = re.findall(r"\w+", pred.lower()), re.findall(r"\w+", gold.lower())
    common = sum(min(p.count(w), g.count(w)) for w in set(g))
    return 0.0 if not common else 2 * common / (len(p) + len(g))


def yes_no(answer: str) -> str:
    a = answer.lower()
    if re.search(r"\b(no|not|never|nothing|haven't|didn't)\b", a):
        return "no"
    return "yes" if re.search(r"\b(yes|we did|we have|discussed|talked)\b", a) else "?"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--user", default="1000")
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--qa", choices=["dataset", "local"], default="dataset")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    os.environ["PAL_HOME"] = tempfile.mkdtemp(prefix="plum-bench-")
    import torch

    from backends.config import ROLES
    from backends.embeddings import HashEmbedder
    from backends.llm.fake import ScriptedLLM
    from backends.vectorstore import BruteForceStore
    from memory.build import MemoryBuilder
    from memory.plum.generate import generate
    from memory.plum.model import attach
    from palset.loader import load_dataset
    from testkit.workspace import make_workspace

    torch.set_num_threads(args.threads)
    ds = load_dataset(ROOT / "data" / "demo")
    user = ds.users[args.user]
    others = [u for u in ds.users.values() if u.uid != user.uid and u.language == user.language]
    trained_neg = [t.requirement_type for s in others[0].sessions for t in s.topics]
    unseen = [t.requirement_type for s in others[1].sessions for t in s.topics][:6]
    ws = make_workspace(Path(os.environ["PAL_HOME"]), env={"PAL_DEFAULT_TIMEOUT": "600"})
    if args.qa == "dataset":
        llm = ws.llm(providers=dict.fromkeys(ROLES, ScriptedLLM(dataset_qa(user, trained_neg))))
    else:
        llm = ws.llm()
    emb = HashEmbedder()
    config = {"threads": args.threads, "max_new_tokens": 48}
    builder = MemoryBuilder("demo", user, "plum", ws.memory, BruteForceStore(emb), emb, llm=llm, config=config,
                            files_root=ws.paths.method_files)
    t0 = time.perf_counter()
    builder.run(until_session=args.sessions - 1)
    print(f"QA source: {args.qa}; user {user.uid}; sessions trained: {args.sessions}; device: "
          f"{'cuda' if torch.cuda.is_available() else 'cpu'} ({args.threads} threads); build {time.perf_counter() - t0:.1f}s")
    method = builder.impl
    ckpts = method.adapters.checkpoints()
    print("\nTraining per session:")
    for c in ckpts:
        r = c.record
        print(f"  {r.sample_id}: {r.pairs} pairs, {r.steps} steps, {r.seconds:.1f}s, loss {r.loss_before:.3f} (before) "
              f"→ {r.losses[0]:.3f} (step 1) → {r.losses[-1]:.3f} (last)")
    last = ckpts[-1].record
    print(f"\nAdapter: {last.trainable_params:,} params, {last.adapter_bytes:,} bytes "
          f"(rank {last.hyper['rank']}, targets {last.hyper['target_modules'] or 'peft default (q_proj, v_proj)'}); "
          f"hyper {json.dumps({k: last.hyper[k] for k in ('lr', 'epochs', 'batch_size', 'max_length', 'weights')})}")

    base = method.base()
    ckpt = ckpts[-1]
    with base.lock:
        attach(base, ckpt.adapter_name, folder=ckpt.folder)
    items = [i for i in builder.store.items_as_of(builder.build_id, 2 * args.sessions - 1) if i.layer == "qa"]

    def answer(q: str, adapter: str | None) -> str:
        return generate(base, [{"role": "user", "content": q}], adapter, max_new_tokens=48).text

    print(f"\nOwn QA pairs ({len(items)}): greedy answers vs gold")
    for name, adapter in (("base", None), ("adapted", ckpt.adapter_name)):
        scores = [(a.strip() == i.meta["answer"].strip(), i.meta["answer"].lower() in a.lower(), f1(a, i.meta["answer"]))
                  for i in items for a in [answer(i.meta["question"], adapter)]]
        n = len(scores)
        print(f"  {name:8} exact {sum(s[0] for s in scores) / n:.1%}  contains {sum(s[1] for s in scores) / n:.1%}  "
              f"token-F1 {sum(s[2] for s in scores) / n:.3f}")
    pos = sorted({i.meta["topic"] for i in items if i.meta["polarity"] == "positive" and i.meta["source"] == "llm"})
    neg = sorted({i.meta["topic"] for i in items if i.meta["polarity"] == "negative"})
    held = [(t, "yes") for t in pos] + [(t, "no") for t in neg] + [(t, "no") for t in unseen]
    print(f"\nHeld-out yes/no ({len(pos)} discussed, {len(neg)} trained-not-discussed, {len(unseen)} never seen): "
          "'Have we ever discussed <topic>?'")
    for name, adapter in (("base", None), ("adapted", ckpt.adapter_name)):
        got = [(g, yes_no(answer(f"Have we ever discussed {t.lower()}?", adapter))) for t, g in held]
        by = {k: [p == g for g, p in got if g == k] for k in ("yes", "no")}
        print(f"  {name:8} accuracy {sum(p == g for g, p in got) / len(got):.1%}  (yes: {sum(by['yes'])}/{len(by['yes'])}, "
              f"no: {sum(by['no'])}/{len(by['no'])}, unclear: {sum(p == '?' for _, p in got)})")


if __name__ == "__main__":
    main()
