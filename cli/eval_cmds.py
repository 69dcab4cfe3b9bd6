"""``pal judge`` (FairEval pairwise judging of simulated runs) and ``pal bench-tasks`` (single-turn tasks)."""

from __future__ import annotations

import argparse
import json
import sys

from cli.context import load_dataset_arg, open_workspace

BENCH_CAPTION = ("BLEU ×100 (restatement R-, proposal P-): Chinese with jieba as the paper, English with word tokens "
                 "(the paper's code runs jieba on every language); G-score 0–100 (failed judge calls left out, counted "
                 "in 'G judge failed'), S-score −100–100; 95% bootstrap CIs over topics")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("judge", help="FairEval: judge finished runs of one method against a baseline, topic by "
                                     "topic (re-running the same command resumes)")
    p.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout")
    p.add_argument("--runs", required=True, metavar="METHOD_A", help="the method under test")
    p.add_argument("--baseline", required=True, metavar="METHOD_B", help="the method it is compared with")
    p.add_argument("--users", help="comma-separated user ids (default: every user with paired runs)")
    p.add_argument("--task-ids", help="comma-separated dialogue-task ids ({sample_id}_{topic_key}, as pal simulate): "
                                      "judge only these topics (default: every topic with paired runs)")
    p.add_argument("--k", type=int, default=3, help="judge samples per order (default 3, as the paper)")
    p.add_argument("--threshold", type=float, default=0.0,
                   help="tie when the mean scores differ by at most this (default 0: exact equality)")
    p.add_argument("--aspects", default="requirement,preference", help="comma-separated: requirement, preference")
    p.add_argument("--temperature", type=float, default=None,
                   help="the judge samples' temperature (default: 1 for k > 1, as FairEval samples its k evidences; "
                        "the judge role's for k = 1). k > 1 at 0 is refused: its samples would be one. A new "
                        "temperature is a new judgment; stored ones are kept")
    p.add_argument("--judge-seed", type=int, default=0,
                   help="base sampling seed of the judge samples, recorded with the judgment (sample i of order o "
                        "gets seed + (o-1)*k + i; default 0); a new seed is a new judgment")
    p.add_argument("--prompts", default=None,
                   help="judge prompt set: mempal (default: the Mem-PAL authors' prompt, Chinese original for Chinese "
                        "users, their Appendix's English for English) or compact (PAL Studio's shorter English wording)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (and the order of equally uncertain topics)")
    p.add_argument("--review-seed", type=int, help="the review batch's seed (its sample and A/B order; default: "
                                                   "random, so annotators cannot work the order out)")
    p.add_argument("--review-uncertain", type=int, metavar="N",
                   help="FairEval human-in-the-loop calibration: send the N most uncertain judged topics (by BPDE) to "
                        "a blinded pairwise review batch for --annotators")
    p.add_argument("--annotators", help="comma-separated reviewer names for --review-uncertain")
    p.add_argument("--overlap", type=int, default=2, help="annotators per item of the review batch (default 2)")
    p.add_argument("--concurrency", type=int, help="judgments in parallel (default: as many as keep the judge's "
                                                   "endpoint busy — its slots or limits ÷ the 2×k samples a judgment "
                                                   "sends at once)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_judge)

    b = sub.add_parser("bench-tasks", help="PAL-Bench single-turn tasks (restatement, proposal, selection) per method")
    b.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout")
    b.add_argument("--methods", required=True, help="comma-separated memory methods")
    b.add_argument("--users", help="comma-separated user ids (default: every user)")
    b.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    b.add_argument("--concurrency", type=int, help="topics in parallel (default: the assistant endpoint's slots or "
                                                   "limits; 8 for an http(s) endpoint nobody configured)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench)


def make_llm():
    """The LLM client for a command (tests replace this)."""
    return open_workspace().llm(session_id="cli-eval")


def units_at_once(llm, role: str, calls_per_unit: int = 1) -> int:
    """How many units keep ``role``'s endpoint busy: its width (slots or limits) ÷ the calls one unit sends at once."""
    return max(1, -(-llm.width(role) // calls_per_unit))


def _split(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def cmd_judge(args: argparse.Namespace) -> int:
    from evaluation.aggregate import aggregate_judgments
    from evaluation.faireval import ASPECTS, FairEvalSettingsError, prompt_set, sampling_temperature
    from evaluation.service import dropped_topics, pair_runs
    from palset.dataset import dataset_key

    aspects = _split(args.aspects)
    if not aspects or any(a not in ASPECTS for a in aspects) or args.k < 1 or args.threshold < 0:
        print(f"error: --aspects must name {', '.join(ASPECTS)}; --k ≥ 1; --threshold ≥ 0", file=sys.stderr)
        return 2
    if args.temperature is not None and not 0 <= args.temperature <= 2:
        print("error: --temperature must lie in 0–2", file=sys.stderr)
        return 2
    if args.temperature is None and args.review_uncertain is not None:
        from evaluation.calibration import FAIREVAL_TEMPERATURE

        args.temperature = FAIREVAL_TEMPERATURE
    try:
        args.temperature = sampling_temperature(args.k, args.temperature)
        prompt_set(args.prompts)
    except FairEvalSettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.review_uncertain is not None and (args.review_uncertain < 1 or not _split(args.annotators)):
        print("error: --review-uncertain needs N ≥ 1 and --annotators", file=sys.stderr)
        return 2
    dataset = load_dataset_arg(args.dataset)
    ws = open_workspace()
    sims = ws.sims
    dkey, users = dataset_key(dataset.root), _split(args.users) or None
    tasks = set(_split(args.task_ids)) or None
    pairs = [p for p in pair_runs(sims, dkey, args.runs, args.baseline, users)
             if tasks is None or f"{p.sample_id}_{p.topic_key}" in tasks]
    dropped = [d for d in dropped_topics(sims, dkey, args.runs, args.baseline, users)
               if tasks is None or f"{d.sample_id}_{d.topic_key}" in tasks]
    if not pairs:
        print(f"error: no topic has finished runs of both {args.runs} and {args.baseline}"
              + (f" ({len(dropped)} topic(s) dropped: {dropped[0].reason}, …)" if dropped else ""), file=sys.stderr)
        return 2
    temperature = "the judge role's temperature" if args.temperature is None else f"temperature {args.temperature:g}"
    print(f"judging {len(pairs)} topic(s) × {len(aspects)} aspect(s), k={args.k} per order at {temperature}, seed "
          f"{args.judge_seed}, prompts {prompt_set(args.prompts).label}; "
          f"{len(dropped)} topic(s) dropped (no finished run of both methods)", file=sys.stderr)
    try:
        judgments = _judge(ws, dataset, pairs, aspects, args)
    except KeyboardInterrupt:
        print("interrupted: finished judgments are saved; run the same command again to resume", file=sys.stderr)
        return 130
    rows = aggregate_judgments(judgments, args.threshold, seed=args.seed, dropped=dropped)
    if args.review_uncertain is not None:
        print(_send_to_review(args, dkey, judgments, ws.reviews), file=sys.stderr)
    print(json.dumps(rows, ensure_ascii=False, indent=1) if args.json else _judge_table(rows, dropped))
    return 0


def _send_to_review(args: argparse.Namespace, dkey: str, judgments: list, reviews) -> str:
    """Create the calibration batch of the N most uncertain judged topics — each stored judgment re-decided under
    the current rules (decision version, tie threshold) first, as the Evaluate page does; returns what to tell."""
    import secrets

    from cli.context import cli_actor, open_workspace
    from evaluation.calibration import plan_calibration, rank_topics, sampling_note
    from evaluation.faireval import apply_decision

    current = [apply_decision(j, args.threshold) for j in judgments]
    ranked = rank_topics(current, seed=args.seed)
    seed = args.review_seed if args.review_seed is not None else secrets.randbelow(2**31)
    plan = plan_calibration("", dkey, ranked, args.review_uncertain, seed, min(args.overlap, len(
        _split(args.annotators))), _split(args.annotators))
    batch_id = reviews.create_batch(plan, cli_actor())
    open_workspace().audit.record(cli_actor(), "review.batch_create", batch_id, title=plan.title, task=plan.task,
                                  items=len(plan.items), annotators=plan.annotators, calibration=True)
    note = sampling_note(current)
    return (f"review batch {batch_id}: the {len(plan.items)} most uncertain of {len(ranked)} topic(s) (BPDE; equal "
            f"ones in a seeded random order, --seed {args.seed}), blinded pairwise items; once answered, the Evaluate "
            "page shows win/tie/lose as calibrated by people" + (f"\nwarning: {note}" if note else ""))


def _judge(ws, dataset, pairs, aspects, args):
    """One ``eval.judge`` unit per (pair, aspect), run here; judgments already stored are loaded, not redone."""
    import uuid

    from cli.jobs_out import Counter, run_job, unit_env
    from jobs.types import JobSpec
    from protocol.units import judge_units

    specs = [(ws.sims.load(p.run_a).spec, ws.sims.load(p.run_b).spec) for p in pairs]
    units = judge_units(dataset, specs, aspects, args.k, args.threshold, temperature=args.temperature,
                        seed=args.judge_seed, prompts=args.prompts)
    job = JobSpec(job_id=f"judge-{uuid.uuid4().hex[:12]}", kind="judge", title=f"judge {args.runs} vs {args.baseline}",
                  created_by="cli", pool="cli", units=units)
    llm = make_llm()
    concurrency = args.concurrency or units_at_once(llm, "judge", 2 * args.k)
    summary = run_job(ws, job, unit_env(ws, llm, Counter(len(units))), concurrency)
    if summary.status != "done":
        raise SystemExit("error: " + "; ".join(summary.errors or [summary.status]))
    return [ws.evals.load_judgment(u.result["judgment_key"]) for u in ws.jobs.store.units(job.job_id)]


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _judge_table(rows: list[dict], dropped: list) -> str:
    from memory.methods import display_name

    lines = [f"{'A vs B':<34} {'aspect':<12} {'win':>4} {'tie':>4} {'lose':>4} {'inv':>4} {'drop':>4} {'adj.win':>8} "
             f"{'95% CI':>15} {'consist':>7} {'pos.dec':>7} {'margin':>6} {'flip':>5} {'slot1':>6} {'longer':>7} "
             f"{'inv.s':>5}"]
    for r in rows:
        lo, hi = r["adjusted_win_rate_ci"]
        longer = r["length_bias"]["longer_win_rate"]
        lines.append(f"{display_name(r['method_a']) + ' vs ' + display_name(r['method_b']):<34} {r['aspect']:<12} {r['win']:>4} {r['tie']:>4} "
                     f"{r['lose']:>4} {r['invalid']:>4} {r['dropped']:>4} {r['adjusted_win_rate']:>8.3f} "
                     f"{f'[{lo:.3f}, {hi:.3f}]':>15} {_num(r.get('position_consistency')):>7} "
                     f"{_num(r.get('position_decided_share')):>7} {_num(r.get('median_margin_decided')):>6} "
                     f"{r['flip_rate']:>5.2f} {r['slot1_win_rate']:>6.2f} "
                     f"{'–' if longer is None else f'{longer:.2f}':>7} {r['invalid_samples']:>5}")
    lines.append("inv: invalid topics (an order without a valid judge sample); drop: topics without a finished run of "
                 "both methods; adj.win: win rate with ties as half (FastChat's win_rate_adjusted) over decided "
                 "topics, CI by a cluster bootstrap over users; consist: judgments whose two orders name the same "
                 "winner; pos.dec: wins/losses whose orders named opposite winners (decided by the judge's slot "
                 "preference); margin: median |mean A − mean B| of wins/losses; longer: win rate of the longer "
                 "dialogue; inv.s: invalid judge samples")
    for r in rows:
        if r.get("ci_note"):
            lines.append(f"{r['aspect']}: {r['ci_note']}")
        if r.get("topics"):
            lines.append(f"{r['aspect']}: of all {r['topics']} topic(s) — " + ", ".join(
                f"{d} {r[f'{d}_share_all']:.0%}" for d in ("win", "tie", "lose", "invalid", "dropped")))
    cut = sum(r.get("cut_samples", 0) for r in rows)
    if cut:
        lines.append(f"{cut} invalid judge sample(s) were cut at the judge's answer budget (max_tokens): leave "
                     "max_tokens unset for the role's own budget fitted to the window, or raise it")
    for d in dropped[:20]:
        lines.append(f"dropped {d.user_id} {d.sample_id} {d.topic_key}: {d.reason}")
    if len(dropped) > 20:
        lines.append(f"… and {len(dropped) - 20} more dropped topic(s)")
    if rows:
        lines.append(f"metric versions: {rows[0]['metric_versions']}")
    return "\n".join(lines)


def cmd_bench(args: argparse.Namespace) -> int:
    from evaluation.aggregate import leaderboard
    from memory.methods import METHODS, NOT_IMPLEMENTED

    methods = _split(args.methods)
    unknown = [m for m in methods if m not in METHODS]
    if not methods or unknown:
        missing = [f"{m}: {NOT_IMPLEMENTED[m.lower()]}" for m in unknown if m.lower() in NOT_IMPLEMENTED]
        print(f"error: unknown method(s) {unknown} (methods: {', '.join(METHODS)})"
              + "".join(f"; not implemented — {x}" for x in missing), file=sys.stderr)
        return 2
    dataset = load_dataset_arg(args.dataset)
    users = _split(args.users) or None
    missing = [u for u in users or [] if u not in dataset.users]
    if missing:
        print(f"error: no user(s) {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        results = _bench(open_workspace(), dataset, methods, users, args.concurrency)
    except KeyboardInterrupt:
        print("interrupted: finished results are saved; run the same command again to resume", file=sys.stderr)
        return 130
    rows = leaderboard(results, seed=args.seed)
    print(json.dumps(rows, ensure_ascii=False, indent=1) if args.json else _bench_table(rows))
    return 0


def _bench(ws, dataset, methods, users, concurrency: int | None):
    """Build units for the memories, then one ``eval.tasks`` unit per (method, query topic), run here."""
    import uuid

    from cli.jobs_out import Counter, run_job, unit_env
    from evaluation.service import query_topics
    from evaluation.tasks import TASKS
    from jobs.types import JobSpec
    from protocol.units import task_units

    units = task_units(dataset, query_topics(dataset, users), methods, list(TASKS))
    tasks = [u for u in units if u.kind == "eval.tasks"]
    job = JobSpec(job_id=f"bench-{uuid.uuid4().hex[:12]}", kind="bench-tasks", title=f"tasks {', '.join(methods)}",
                  created_by="cli", pool="cli", units=units)
    llm = make_llm()
    summary = run_job(ws, job, unit_env(ws, llm, Counter(len(tasks))), concurrency or units_at_once(llm, "assistant"))
    if summary.status != "done":
        raise SystemExit("error: " + "; ".join(summary.errors or [summary.status]))
    keys = [k for u in ws.jobs.store.units(job.job_id) if u.kind == "eval.tasks" for k in u.result["results"]]
    return [r for k in keys if (r := ws.evals.get_result(k)) is not None]


def _cell(m: dict) -> str:
    return f"{m['value']:.1f} [{m['ci'][0]:.1f},{m['ci'][1]:.1f}]"


def _bench_table(rows: list[dict]) -> str:
    from memory.methods import display_name

    cols = [("R-B1", "restatement_bleu1"), ("R-B2", "restatement_bleu2"), ("R-B3", "restatement_bleu3"),
            ("R-B4", "restatement_bleu4"), ("G", "g_score"), ("P-B1", "proposal_bleu1"), ("P-B2", "proposal_bleu2"),
            ("P-B3", "proposal_bleu3"), ("P-B4", "proposal_bleu4"), ("S", "s_score")]
    lines = ["method".ljust(14) + "".join(f"{name:>21}" for name, _ in cols) + f"{'G judge failed':>16}"]
    for r in rows:
        lines.append(display_name(r["method"]).ljust(14) + "".join(f"{_cell(r[key]):>21}" for _, key in cols)
                     + f"{r['g_judge_failed']:>16}")
    lines.append(BENCH_CAPTION)
    if rows:
        lines.append(f"metric versions: {rows[0]['metric_versions']}")
    return "\n".join(lines)
