"""``pal simulate corpus``: the turn rules (and the stance judge) measured on the labelled corpora of text the project
did not write (:mod:`evaluation.simfidelity.corpus`)."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("corpus", help="the turn rules measured on the labelled corpora (tests/sim/corpus): accuracy, "
                                      "Cohen's kappa, precision and recall per label, rejections read as acceptance")
    c.add_argument("--corpus", choices=["stance", "persona", "all"], default="all")
    c.add_argument("--split", choices=["test", "dev", "all"], default="test",
                   help="test: the frozen held-out split (default); dev: the split rules may be tuned on")
    from evaluation.simfidelity.stance_instruments import INSTRUMENT_NAMES, STANCE_INSTRUMENTS

    c.add_argument("--classifier", choices=INSTRUMENT_NAMES, default="rule",
                   help="the stance instrument: " + "; ".join(f"{i.name}: {i.description}" for i in STANCE_INSTRUMENTS)
                        + " (judge: also the persona judge)")
    c.add_argument("--errors", action="store_true",
                   help="list the dev split's misread items (the test split's are never listed: nobody tunes on them)")
    c.add_argument("--save", action="store_true",
                   help="store the stance figures in the run store (the Evaluate page offers the judge as the stance "
                        "instrument where it reads the held-out split better than the rules)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_corpus)


def cmd_corpus(args: argparse.Namespace) -> int:
    from backends.prompts import load_prompt
    from evaluation.simfidelity.corpus import (
        SPLITS,
        StanceClassifier,
        judge_stance_of,
        judge_voice_of,
        load_corpus,
        measure_persona,
        measure_persona_judge,
        measure_stance,
        render_scores,
        rule_stance,
    )
    from evaluation.simfidelity.instruments import InstrumentScores
    from evaluation.simfidelity.judges import STANCE_PROMPT
    from sim.rulebook import rulebook_version

    splits = SPLITS if args.split == "all" else (args.split,)
    scores = []
    llm = _judge_llm() if args.classifier == "judge" else None
    if args.corpus in ("stance", "all"):
        classify: StanceClassifier = rule_stance
        name, model, version = "rule", "", rulebook_version()
        if llm is not None:
            classify, model = judge_stance_of(llm), llm.config.role("judge").model
            name, version = f"judge {model}", load_prompt(STANCE_PROMPT).version
        elif args.classifier in ("learned", "cascade"):
            classify, name, model, version = _learned(args.classifier)
        stance = measure_stance(load_corpus("stance"), classify, name, splits)
        scores += stance
        if args.save:
            _save(InstrumentScores(instrument=args.classifier, model=model, version=version, scores=stance))
    if args.corpus in ("persona", "all"):
        scores += measure_persona(load_corpus("persona"), splits)
        if llm is not None:
            scores += measure_persona_judge(load_corpus("persona"), judge_voice_of(llm),
                                            f"judge {llm.config.role('judge').model}", splits)
    if args.json:
        shown = [s.model_copy(update={"errors": s.errors if s.split == "dev" else []}) for s in scores]
        print(json.dumps([s.model_dump() for s in shown], ensure_ascii=False, indent=1))
        return 0
    print(render_scores(scores))
    if args.errors:
        for s in scores:
            if s.split == "dev" and s.errors and s.rule in ("stance", "in persona"):
                print(f"\n{s.rule} {s.language} dev, misread:")
                for e in s.errors:
                    print(f"  {e['gold']:>7} read as {e['predicted']:<7} {e['text']}")
    return 0


def _learned(name: str):
    """(classifier, its name, the embedder, the fitted model's fingerprint) of the learned instrument or the cascade,
    fitted on the stance corpus's dev split over the workspace's mixed-language embedder."""
    from cli.context import open_workspace
    from evaluation.simfidelity.corpus import load_corpus
    from evaluation.simfidelity.learned import cascade_stance_of, learned_stance_of, load_spec, train

    spec = load_spec()
    model = train(load_corpus(spec.corpus), open_workspace().embedder(None, spec.embedder_language), spec)
    print(f"{name}: fitted on {len(model.trained_on)} {spec.train_split} items ({model.fingerprint}); its dev "
          "figures are in-sample", file=sys.stderr)
    classify = learned_stance_of(model) if name == "learned" else cascade_stance_of(model)
    return classify, name, model.embedder.name, model.fingerprint


def _judge_llm():
    """The configured judge role's client (an error names the role when none is configured)."""
    from cli.context import open_workspace

    llm = open_workspace().llm(session_id="cli-corpus")
    print(f"judge: {llm.config.role('judge').model}", file=sys.stderr)
    return llm


def _save(scores) -> None:
    from cli.context import open_workspace

    open_workspace().instruments.save(scores)
    print(f"stored the stance figures of {scores.instrument} {scores.model}".rstrip() + f" (version {scores.version})",
          file=sys.stderr)
