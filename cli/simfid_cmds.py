"""``pal simulate fidelity``: is the simulated user the user the dataset describes? Checks every simulated user turn of
the dataset's stored runs (or ``--runs``), stores the results and prints the simulator-fidelity leaderboard (one row
per simulator and model), with agreement against people where a ``simturn`` review batch has answers."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from cli import corpus_cmds

log = logging.getLogger(__name__)


def register(parent: argparse.ArgumentParser) -> None:
    sub = parent.add_subparsers(dest="simulate_command", metavar="{fidelity,corpus}")
    f = sub.add_parser("fidelity", help="simulator fidelity of stored runs: per-turn checks, per simulator figures")
    f.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout")
    f.add_argument("--runs", help="comma-separated run ids (default: every stored run of the dataset)")
    f.add_argument("--users", help="comma-separated user ids (default: every user)")
    f.add_argument("--simulators", help="comma-separated simulators to keep (llm, llm+style, replay, always-accept, "
                                        "random-verdict)")
    from evaluation.simfidelity.stance_instruments import INSTRUMENT_NAMES, STANCE_INSTRUMENTS

    f.add_argument("--classifier", choices=INSTRUMENT_NAMES, default="rule",
                   help="what reads the stance of confirmations and verdicts nobody structured: "
                        + "; ".join(f"{i.name}: {i.description}" for i in STANCE_INSTRUMENTS))
    f.add_argument("--persona-judge", action="store_true",
                   help="ask the judge role whether turns stating facts about the user contradict the profile")
    f.add_argument("--threshold", type=float, help="cosine for a match (default: the embedder's τ)")
    f.add_argument("--own-dialogues", action="store_true",
                   help="add rows checking the dataset's own dialogues of the query topics: as written (the ceiling, "
                        "and the checks' own error floor), and with always-accept and random-verdict user turns "
                        "answering the dataset's assistant turns (the floors)")
    f.add_argument("--probes", metavar="SIMULATORS",
                   help="add counterfactual probes for over-cooperation with these simulators (comma-separated: llm, "
                        "always-accept, random-verdict): the dataset's query dialogues up to their first Solution "
                        "Feedback, the proposal replaced by each disliked and each liked candidate solution; stored, "
                        "so a probe is asked once")
    f.add_argument("--probe-limit", type=int, metavar="N",
                   help="at most N probes per simulator, taken in turn from every user (default: all)")
    f.add_argument("--recompute", action="store_true", help="check again even where a stored result matches")
    out = f.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="everything: per-run results, leaderboard, agreement")
    out.add_argument("--format", choices=["table", "csv"], default="table", help="leaderboard as a table or CSV")
    f.set_defaults(func=cmd_fidelity)
    corpus_cmds.register(sub)


def _split(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def _select(ws, dkey: str, args: argparse.Namespace) -> list:
    """The stored runs to check; an unknown run id or simulator raises ``ValueError`` naming it."""
    from sim.types import parse_variant

    ids = _split(args.runs)
    if ids is None:
        ids = [r["run_id"] for r in reversed(ws.sims.list(dataset=dkey))]
    records = []
    for run_id in ids:
        try:
            records.append(ws.sims.load(run_id))
        except KeyError:
            raise ValueError(f"no simulation run {run_id!r} in this PAL home (pal runs list)") from None
    wanted_sims = _split(args.simulators)
    for name in wanted_sims or []:
        parse_variant(name)
    users = _split(args.users)
    return [r for r in records if (users is None or r.spec.user_id in users)
            and (wanted_sims is None or r.spec.simulator_variant in wanted_sims)]


def cmd_fidelity(args: argparse.Namespace) -> int:
    from backends.config import ConfigError
    from cli.context import load_dataset_arg, open_workspace
    from evaluation.simfidelity import CHECK_DEFINITIONS, FIGURE_DEFINITIONS
    from evaluation.simfidelity.aggregate import leaderboard
    from evaluation.simfidelity.service import OWN_DIALOGUE_SIMULATORS, matchers, measure_runs, own_dialogue_runs
    from evaluation.simfidelity.types import SimFidelityConfig
    from palset.dataset import dataset_key

    dataset = load_dataset_arg(args.dataset)
    try:
        config = SimFidelityConfig(classifier=args.classifier, persona_judge=args.persona_judge,
                                   threshold=args.threshold)
        ws = open_workspace()
        records = _select(ws, dataset_key(dataset.root), args)
        probes = _probe_simulators(args.probes)
        llm = ws.llm(session_id="cli-simfidelity") if config.classifier == "judge" or config.persona_judge else None
    except (ValueError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not records and not args.own_dialogues and not probes:
        print(f"error: no simulation run of {args.dataset} to check (pal simulate --dataset … first)", file=sys.stderr)
        return 2
    matcher_for = matchers(lambda language: ws.embedder(None, language), config.threshold)

    def progress(done: int, total: int, run_id: str) -> None:
        print(f"[{done}/{total}] {run_id}", file=sys.stderr, flush=True)

    if args.own_dialogues:  # stored like a run's result, so the Evaluate page's board shows the scale too
        records += [r for kind in OWN_DIALOGUE_SIMULATORS
                    for r in own_dialogue_runs(dataset, _split(args.users), simulator=kind)]
    results, errors = measure_runs(records, dataset, matcher_for, ws.simfidelity, config=config, llm=llm,
                                   progress=progress, recompute=args.recompute)
    if probes:
        more, failed = _probes(ws, dataset, probes, args, matcher_for, config, llm)
        results, errors = results + more, {**errors, **failed}
    board = leaderboard(results)
    for run_id, error in errors.items():
        print(f"error: {run_id}: {error}", file=sys.stderr)
    if args.json:
        print(json.dumps({"dataset": str(dataset.root), "config": config.model_dump(), "leaderboard": board,
                          "runs": [_run_summary(r) for r in results], "errors": errors,
                          "human_agreement": _agreement(ws, dataset_key(dataset.root)),
                          "definitions": {"checks": CHECK_DEFINITIONS, "figures": FIGURE_DEFINITIONS}},
                         ensure_ascii=False, indent=1, default=str))
    elif args.format == "csv":
        from evaluation.simfidelity.export import board_csv

        sys.stdout.write(board_csv(board))
    else:
        from evaluation.simfidelity.export import board_text

        print(board_text(board))
    return 1 if errors else 0


def _probe_simulators(text: str | None) -> list[str]:
    """The probe simulators asked for; ``ValueError`` naming the choices for an unknown one."""
    from evaluation.simfidelity.probes import PROBE_SIMULATORS

    names = _split(text) or []
    for name in names:
        if name not in PROBE_SIMULATORS:
            raise ValueError(f"unknown probe simulator {name!r} (choices: {', '.join(PROBE_SIMULATORS)})")
    return names


def _probes(ws, dataset, simulators: list[str], args: argparse.Namespace, matcher_for, config, llm):
    """Every probe of every simulator asked for (stored results reused), with progress and an ETA on stderr."""
    from cli.progress import progress_printer
    from evaluation.simfidelity.probes import build_cases, interleaved, llm_side, measure_probes, reference_side

    cases = interleaved(build_cases(dataset, _split(args.users)))[:args.probe_limit]
    results, errors = [], {}
    for kind in simulators:
        if kind == "llm":
            sim_llm = ws.llm(session_id="cli-simfidelity-probes")
            side, model = llm_side(sim_llm), sim_llm.config.role("user_simulator").model
        else:
            side, model = reference_side(kind), kind
        got, failed = measure_probes(dataset, cases, kind, side, model, matcher_for, ws.simfidelity, config=config,
                                     llm=llm, progress=progress_printer("probe"))
        results += got
        errors.update(failed)
    return results, errors


def _run_summary(r) -> dict:
    return {"run_id": r.run_id, "user": r.user_id, "sample": r.sample_id, "topic": r.topic_key, "method": r.method,
            "simulator": r.simulator, "model": r.simulator_model, "status": r.status, "passed": r.passed,
            "no_gold": r.no_gold, "unavailable": r.unavailable, "figures": r.figures, "counts": r.counts,
            "figures_first_drafts": r.figures_first, "counts_first_drafts": r.counts_first,
            "interventions": ({**r.interventions.figures(), "reasons": r.interventions.reasons,
                               "decisions": r.interventions.decisions, "note": r.interventions.note}
                              if r.interventions is not None else None),
            "checks_version": r.checks_version, "seconds": r.seconds, "turns": [t.model_dump() for t in r.turns],
            "first_drafts": [t.model_dump() for t in r.first_drafts]}


def _agreement(ws, dkey: str) -> list[dict]:
    """Checks against people, for every ``simturn`` batch of the dataset with answers."""
    from evaluation.simfidelity.agreement import checker_agreement

    out = []
    for batch in ws.reviews.batches():
        if batch["task"] == "simturn" and batch["dataset"] == dkey and ws.reviews.count_answers(batch["batch_id"]):
            report = checker_agreement(ws.reviews, batch["batch_id"], ws.simfidelity)
            out.append({"batch_id": batch["batch_id"], "title": batch["title"], **report})
    return out
