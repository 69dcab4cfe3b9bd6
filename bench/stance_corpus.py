"""The stance and persona rules on text the project did not write (``tests/sim/corpus/``, frozen held-out split):
accuracy, Cohen's κ, precision and recall per label, rejections read as acceptance — beside the learned stance
instrument and the cascade of rules and learned model (fitted on the dev split only, over the workspace's
mixed-language embedder; their dev figures are in-sample), and the stance judge of each installed local model on the
same items, so the page can say which instrument agrees best.

Targets (issue 50): stance accuracy ≥ 90 % on the held-out split in each language; rejections read as acceptance
≤ 2 % of the rejections. Printed as met or not, never asserted.

Run: ``nice -n 10 .venv/bin/python bench/stance_corpus.py [--split test|dev|all] [--judge-models
smollm2-135m,qwen2.5-coder-0.5b] [--limit N] [--timeout S]``; a judge call that fails (a timeout on a busy machine)
is logged and counts as a miss. A judge model runs on one local server (two threads) in a fresh
temporary PAL_HOME; models not installed are named and skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PAL_HOME", tempfile.mkdtemp(prefix="pal-bench-corpus-"))

ACCURACY_TARGET = 0.90
REJECT_AS_ACCEPT_TARGET = 0.02


def targets(scores) -> None:
    for s in scores:
        if s.rule != "stance" or s.split != "test":
            continue
        share = s.reject_as_accept / s.rejections if s.rejections else 0.0
        print(f"  {s.classifier} {s.language}: accuracy {s.accuracy:.3f} "
              f"({'met' if s.accuracy is not None and s.accuracy >= ACCURACY_TARGET else 'NOT met'}, target "
              f"{ACCURACY_TARGET:.0%}); reject→accept {s.reject_as_accept}/{s.rejections} = {share:.1%} "
              f"({'met' if share <= REJECT_AS_ACCEPT_TARGET else 'NOT met'}, target ≤ {REJECT_AS_ACCEPT_TARGET:.0%})")


def per_language(items, splits, limit: int | None) -> list:
    """The items of ``splits``, at most ``limit`` of each language (in file order)."""
    chosen = [i for i in items if i.split in splits]
    if limit is None:
        return chosen
    return [i for lang in ("en", "zh") for i in [x for x in chosen if x.language == lang][:limit]]


def judge_scores(model_name: str, items, splits, limit: int | None, timeout: float):
    from bench.simulator_fidelity import installed, workspace_for
    from evaluation.simfidelity.corpus import (
        judge_stance_of,
        judge_voice_of,
        load_corpus,
        measure_persona_judge,
        measure_stance,
    )

    model = installed(model_name)
    if model is None:
        return []
    ws = workspace_for(Path(tempfile.mkdtemp(prefix="pal-bench-corpus-judge-")), model, 128, timeout)
    llm = ws.llm(session_id="bench-corpus-judge")
    chosen = per_language(items, splits, limit)
    started = time.perf_counter()
    scores = measure_stance(chosen, judge_stance_of(llm), f"judge {model.name}", splits)
    persona = per_language(load_corpus("persona"), splits, limit)
    scores += measure_persona_judge(persona, judge_voice_of(llm), f"judge {model.name}", splits)
    seconds = time.perf_counter() - started
    items = len(chosen) + len(persona)
    print(f"  judge {model.name}: {items} items in {seconds:.0f} s ({seconds / max(items, 1):.1f} s an item)")
    return scores


def learned_scores(items, splits) -> list:
    """The learned instrument and the cascade, fitted on the dev split over the workspace's mixed-language embedder."""
    from evaluation.simfidelity.corpus import measure_stance
    from evaluation.simfidelity.learned import cascade_stance_of, learned_stance_of, load_spec, train
    from testkit.workspace import make_workspace

    spec = load_spec()
    ws = make_workspace(Path(tempfile.mkdtemp(prefix="pal-bench-corpus-learned-")))
    started = time.perf_counter()
    model = train(items, ws.embedder(None, spec.embedder_language), spec)
    fitted = time.perf_counter() - started
    trained = set(model.trained_on)
    if any(i.split != spec.train_split for i in items if i.id in trained):
        raise SystemExit("a held-out item was trained on")
    print(f"  learned {model.fingerprint}: fitted on {len(model.trained_on)} {spec.train_split} items in "
          f"{fitted:.1f} s (embedding included); chosen by {spec.selected_by}")
    return (measure_stance(items, learned_stance_of(model), "learned", splits)
            + measure_stance(items, cascade_stance_of(model), "cascade", splits))


def main() -> None:
    from evaluation.simfidelity.corpus import SPLITS, load_corpus, measure_persona, measure_stance, render_scores

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["test", "dev", "all"], default="test")
    parser.add_argument("--judge-models", default="", help="comma-separated catalog models to measure as the judge")
    parser.add_argument("--limit", type=int, help="at most N items of each language and corpus for each judge")
    parser.add_argument("--no-learned", action="store_true", help="leave out the learned instrument and the cascade")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a judge answer may take")
    args = parser.parse_args()
    splits = SPLITS if args.split == "all" else (args.split,)
    stance = load_corpus("stance")
    print(f"load: {os.getloadavg()}")
    scores = measure_stance(stance, splits=splits)
    if not args.no_learned:
        scores += learned_scores(stance, splits)
    for name in filter(None, args.judge_models.split(",")):
        scores += judge_scores(name.strip(), stance, splits, args.limit, args.timeout)
    print(render_scores(scores))
    print("\nTargets on the held-out split:")
    targets(scores)
    print("\nPersona rules:")
    print(render_scores(measure_persona(load_corpus("persona"), splits)))


if __name__ == "__main__":
    main()
