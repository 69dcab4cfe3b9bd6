"""``pal memory fidelity``: how close a method's memory is to the gold memory, per user, with the reference
memories beside it and a summary over users; ``pal memory fidelity-threshold``: choose τ for an embedder on a
dataset's held-out pairs (with the ROC AUC).

Methods without an LLM are built (or resumed) first; an LLM method must be built already (``pal memory
build``) unless ``--build`` is given. Every report — the references' too — is stored in the run store.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from memory.methods import METHODS

log = logging.getLogger(__name__)
SHORT = {"situation_within": "κ within", "situation_across": "κ across", "situation_cross_merges": "x-merges",
         "requirement_recall": "req R", "requirement_precision": "req P", "requirement_f1": "req F1",
         "requirement_bleu1": "req BLEU1", "preference_recall": "pref R", "preference_precision": "pref P",
         "preference_f1": "pref F1", "polarity_errors": "polarity", "background_coverage": "bg R",
         "background_precision": "bg P", "background_f1": "bg F1", "text_recall": "text R",
         "text_precision": "text P", "text_f1": "text F1", "text_grounded": "grounded", "text_noise": "noise"}


def register(msub: argparse._SubParsersAction) -> None:
    c = msub.add_parser("fidelity", help="fidelity of a method's memory against the gold memory (oracle upper bound), "
                                         "with the reference memories beside it")
    c.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout")
    who = c.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", help="one user id")
    who.add_argument("--users", help="comma-separated user ids, or 'all'")
    c.add_argument("--method", required=True, choices=list(METHODS))
    c.add_argument("--embedder", help="embedder name (default: configured, 'auto' by language)")
    c.add_argument("--threshold", type=float, help="cosine for a match (default: the embedder's calibrated τ)")
    c.add_argument("--build", action="store_true", help="also build an LLM method's missing sessions (slow)")
    c.add_argument("--no-references", action="store_true", help="skip the reference memories (empty, one group per "
                                                                "session, full history, another user, gold)")
    c.add_argument("--judge", action="store_true", help="add the judge-based variant (judge role; one call a statement)")
    c.add_argument("--judge-limit", type=int, default=None, help="judge at most this many gold statements per user")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_fidelity)

    t = msub.add_parser("fidelity-threshold", help="choose fidelity's match threshold τ for an embedder on a dataset's "
                                                   "held-out pairs (each user a fold), with the ROC AUC")
    t.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout (input.json needed)")
    t.add_argument("--embedder", help="embedder name (default: configured, 'auto' by language)")
    t.add_argument("--language", choices=["en", "zh"], help="only the users of this language")
    t.add_argument("--seed", type=int, default=0, help="seed of the unmatched pairs drawn")
    t.add_argument("--judge", action="store_true",
                   help="also measure the judge matcher (judge role) on the same matched and hard-negative pairs: "
                        "its match precision, TPR and false matches (one call a pair)")
    t.add_argument("--judge-limit", type=int, default=40, metavar="N",
                   help="with --judge: at most N matched and N hard-negative pairs, a seeded draw (default 40; 0: all)")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_threshold)


def _users(args: argparse.Namespace, dataset) -> list[str]:
    if args.user:
        return [args.user]
    if args.users.strip() == "all":
        return list(dataset.users)
    return [u.strip() for u in args.users.split(",") if u.strip()]


def _measure(ws, dataset, uid: str, args: argparse.Namespace, config):
    from evaluation.fidelity.compute import StatementVectors
    from evaluation.fidelity.service import judge_report, measure_build, reference_reports
    from memory.methods import get_method_class
    from palset.dataset import dataset_key

    builder = ws.open_builder(dataset, uid, args.method, embedder=args.embedder)
    if builder.latest_stage() < builder.total_stages - 1:
        if get_method_class(args.method).uses_llm and not args.build:
            raise RuntimeError(f"{args.method} for user {uid} is not fully built: run `pal memory build --dataset "
                               f"{args.dataset} --user {uid} --method {args.method}` or pass --build")
        print(f"building {args.method} for user {uid}…", file=sys.stderr)
        builder.run()
    vectors = StatementVectors(builder.embedder)
    report = measure_build(builder, ws.fidelity, config=config, vectors=vectors)
    if args.judge:
        report = judge_report(report, builder, builder.llm or _llm(), ws.fidelity, limit=args.judge_limit)
    refs = [] if args.no_references else reference_reports(dataset, dataset_key(dataset.root), builder.user,
                                                           builder.embedder, ws.fidelity, config=config,
                                                           vectors=vectors)
    return report, refs


def _row(report) -> dict:
    from evaluation.fidelity.board import report_summary

    out = report_summary(report)
    out["threshold"], out["embedder"] = report.threshold, report.embedder
    if report.judge is not None:
        out["judge"] = report.judge.model_dump(exclude={"verdicts", "support"})
    out["missed"] = [m.model_dump() for m in report.misses if m.layer != "text"]
    return out


def _llm():
    from cli.context import open_workspace

    return open_workspace().llm(session_id="cli-fidelity")


def cmd_fidelity(args: argparse.Namespace) -> int:
    from backends.config import ConfigError
    from backends.llm.errors import LLMError
    from cli.context import open_workspace
    from evaluation.fidelity import DEFINITIONS
    from evaluation.fidelity.availability import availability
    from evaluation.fidelity.board import leaderboard
    from evaluation.fidelity.types import FidelityConfig
    from memory.methods import display_name
    from palset.loader import load_dataset

    dataset = load_dataset(args.dataset, lazy=True)
    if not dataset.users:
        print(f"error: {args.dataset}: no users ({'; '.join(str(p) for p in dataset.problems[:3])})", file=sys.stderr)
        return 2
    uids = _users(args, dataset)
    unknown = [u for u in uids if u not in dataset.users]
    if unknown:
        print(f"error: no user {', '.join(unknown)} in {args.dataset}", file=sys.stderr)
        return 2
    try:
        config = FidelityConfig(threshold=args.threshold)
    except ValueError as e:
        print(f"error: --threshold: {e}", file=sys.stderr)
        return 2
    ws = open_workspace()
    reports, refs, rows, failed = [], [], [], 0
    for uid in uids:
        try:
            report, theirs = _measure(ws, dataset, uid, args, config)
            reports.append(report)
            refs += theirs
            rows.append(_row(report))
        except (RuntimeError, KeyError, ValueError, ConfigError, LLMError) as e:
            log.warning("fidelity of %s for user %s failed", args.method, uid, exc_info=True)
            print(f"error: user {uid}: {e}", file=sys.stderr)
            failed += 1
    board = leaderboard(reports)
    files = [a.model_dump() for a in availability(dataset) if not a.available]
    result = {"method": args.method, "label": display_name(args.method), "dataset": str(dataset.root),
              "users": rows, "summary": board[0] if board else None, "references": leaderboard(refs),
              "definitions": DEFINITIONS, "unavailable_files": files}
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2, default=str))
    else:
        _print_table(result)
    return 1 if failed else 0


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _print_table(result: dict) -> None:
    from evaluation.fidelity.types import HEADLINE

    head = "".join(f"{SHORT[n]:>10}" for n in HEADLINE)
    print(f"{result['label']} on {result['dataset']} (headline: each user's last history session)")
    print(f"{'user':<28}" + head)
    for r in result["users"]:
        print(f"{r['user'] + ' @ ' + str(r['as_of']):<28}" + "".join(f"{_fmt(r[n]):>10}" for n in HEADLINE))
    rows = [*result["references"], *([result["summary"]] if result["summary"] else [])]
    if rows:
        print("\nmean over users — a method's figure means something only above the reference rows:")
        print(f"{'':<28}" + head)
        for s in rows:
            print(f"{s['method'][:27]:<28}" + "".join(f"{_fmt(s[n]['value']):>10}" for n in HEADLINE))
        s = rows[-1]
        print(f"threshold τ {s['threshold']:g} ({s['embedder']}): {s['threshold_source']}; 95% bootstrap CIs over users "
              "in --json")
        if s.get("default_matcher") == "judge":
            print(f"default matcher: the judge ({s['embedder']} has not shown a match precision of 0.9 against hard "
                  "negatives: its matches are of topic, not of need) — add --judge for its verdicts")
        for name, why in (result["summary"] or {}).get("not_measured", {}).items():
            print(f"n/a {name}: {why}")
    for ref in result["references"]:
        print(f"{ref['method']}: {ref['label'].split(' — ', 1)[-1]} — expected: {ref['expect']}")
    for f in result["unavailable_files"]:
        print(f"not measurable here: {f['figure']} needs {', '.join(f['missing'])}")


def cmd_threshold(args: argparse.Namespace) -> int:
    from cli.context import open_workspace
    from evaluation.fidelity.threshold import calibrate
    from palset.loader import load_dataset

    dataset = load_dataset(args.dataset, lazy=True)
    users = [u for u in dataset.users.values() if args.language is None or u.language == args.language]
    languages = sorted({u.language for u in users})
    if len(languages) != 1:
        print(f"error: {args.dataset}: users in {', '.join(languages) or 'no language'}; pick one with --language "
              "(τ belongs to one embedder)", file=sys.stderr)
        return 2
    embedder = open_workspace().embedder(args.embedder, languages[0])
    try:
        cal = calibrate(users, embedder, seed=args.seed)
    except ValueError as e:
        print(f"error: {args.dataset}: {e}", file=sys.stderr)
        return 2
    judged = _judge_pairs(users, args) if args.judge else None
    if args.json:
        data = cal.model_dump() | ({"judge_matcher": judged.report()} if judged else {})
        print(json.dumps(data, ensure_ascii=False, indent=1))
        return 0
    print(f"{cal.embedder} on {args.dataset} ({len(cal.users)} users, {cal.positives} matched and {cal.negatives} "
          f"unmatched pairs): τ = {cal.tau:g}, ROC AUC {_fmt(cal.auc)}")
    print(f"held out (τ chosen without the user): TPR {_fmt(cal.tpr)}, FPR {_fmt(cal.fpr)}; false matches with another "
          f"user {_fmt(cal.by_kind.get('other user'))}, with another aspect {_fmt(cal.by_kind.get('other aspect'))}")
    print(f"match precision against {cal.hard_negatives} hard negatives (another need of the same user and aspect), "
          f"held out: {_fmt(cal.match_precision)} at τ; false matches {_fmt(cal.by_kind.get('same aspect'))}; "
          f"ROC AUC {_fmt(cal.hard_auc)}")
    reach = (f"τ {cal.precise_tau:g} reaches it on all pairs, held out {_fmt(cal.precise_precision)}"
             if cal.precise_tau is not None else "no τ reaches it")
    print(f"precision ≥ {cal.min_precision:g}: {reach} → default matcher: "
          f"{'this embedding at τ' if cal.reaches else 'the judge (the embedding tells topics apart, not needs)'}")
    for f in cal.folds:
        print(f"  fold {f.user}: τ {f.tau:g}  TPR {_fmt(f.tpr)}  FPR {_fmt(f.fpr)}  ({f.positives}+/{f.negatives}−)")
    print("use it: pal memory fidelity --threshold τ (or the Memory page's τ field)")
    if judged is not None:
        _print_judge_pairs(judged)
    return 0


def _judge_pairs(users, args: argparse.Namespace):
    """The judge matcher on the calibration's matched and hard-negative pairs, with progress on stderr."""
    from cli.context import open_workspace
    from cli.progress import progress_printer
    from evaluation.fidelity.judge_pairs import judge_pairs, sample_pairs
    from evaluation.fidelity.threshold import calibration_pairs

    pairs = sample_pairs(calibration_pairs(users, seed=args.seed), args.judge_limit or None, args.seed)
    llm = open_workspace().llm(session_id="cli-fidelity-judge-pairs")
    return judge_pairs(llm, pairs, progress_printer("judge pair"))


def _print_judge_pairs(j) -> None:
    from evaluation.takeaway_words import wilson

    called = j.true_matches + j.false_matches
    ci = wilson(j.true_matches, called) if called else None
    print(f"judge matcher ({j.judge_model}, prompt v{j.prompt_version}) on {j.matched} matched and "
          f"{j.hard_negatives} hard-negative pairs: match precision {_fmt(j.precision)}"
          + (f" (95 % Wilson {ci.low:.2f}–{ci.high:.2f})" if ci else "")
          + f", TPR {_fmt(j.tpr)}, hard negatives called a match {_fmt(j.hard_fpr)}, invalid {j.invalid} → "
          + ("reaches 0.9: a defensible default matcher" if j.reaches else
             "below 0.9: the judge does not tell one need from another either"))
