"""``pal personamem``: PersonaMem-v2 accuracy of one memory method (MCQ and open-ended)."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("personamem", help="PersonaMem-v2: build a method's memory over a chat history, answer the "
                                          "question items (4-way MCQ and open-ended, judged) and print accuracy")
    p.add_argument("--persona", required=True, help="persona JSON (raw_data_…_persona<i>.json, wrapped in its id, "
                                                    "or an unwrapped profile)")
    p.add_argument("--history", required=True, help="chat history JSON {metadata, chat_history}")
    p.add_argument("--questions", required=True, help="question items: a raw persona file, a benchmark CSV split "
                                                      "(benchmark.csv, train.csv, val.csv), {'items': [...]} or a "
                                                      "list of items")
    p.add_argument("--persona-id", help="which persona of a file holding several (default: the history's "
                                        "metadata.persona_id)")
    p.add_argument("--method", required=True, help="memory method (see `pal memory`)")
    p.add_argument("--seed", type=int, default=0, help="option-shuffling seed (default 0)")
    p.add_argument("--limit", type=int, help="evaluate at most this many items")
    p.add_argument("--exchanges", type=int, default=10, help="user/assistant exchanges per pseudo-session (default 10)")
    p.add_argument("--forms", default="mcq,open", help="comma-separated: mcq, open (default both)")
    p.add_argument("--judges", type=int, default=None, help="open-ended: independent judge calls per answer "
                                                             "(default 1, or one per --judge-models; the paper uses 3)")
    p.add_argument("--judge-models", help="open-ended: comma-separated judge models on the judge role's endpoint, one "
                                          "call each; with more than one, their mean is the verdict (the paper's "
                                          "three judges)")
    p.add_argument("--judge-aggregate", choices=("mean", "majority"), default=None,
                   help="open-ended: combine the judges by mean score or majority vote (default mean)")
    p.add_argument("--judge-scale", choices=("binary", "continuous"), default="binary",
                   help="open-ended: judge scores 0/1 (default) or 0–1 as the released code")
    p.add_argument("--records", help="also write every record (options, seed, raw outputs) as JSON lines here")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_personamem)


def make_llm():
    """The LLM client for a command (tests replace this)."""
    from cli.context import open_workspace

    return open_workspace().llm(session_id="cli-personamem")


def make_builder(dataset: str, user, method: str, llm):
    """The workspace's memory builder for this chat history's pseudo-user (tests replace this)."""
    from cli.context import open_workspace

    return open_workspace().open_user_builder(dataset, user, method, llm=llm)


def _load(args: argparse.Namespace):
    """(persona, history, question file) or an error message naming the file."""
    from evaluation.personamem.loader import load_history, load_persona, read_questions

    history = load_history(args.history)
    pid = args.persona_id if args.persona_id is not None else (
        None if history.metadata.persona_id is None else str(history.metadata.persona_id))
    persona = load_persona(args.persona, args.persona_id)
    questions = read_questions(args.questions, pid)
    return persona, history, questions


def _run(args: argparse.Namespace, forms: tuple[str, ...], persona_id: str | None) -> list:
    """One ``personamem`` unit (build over the history, then every item), run here."""
    import uuid
    from pathlib import Path

    from cli.context import open_workspace
    from cli.jobs_out import run_job, unit_env
    from jobs.types import JobSpec, UnitSpec

    ws = open_workspace()
    payload = {"persona": str(Path(args.persona).resolve()), "history": str(Path(args.history).resolve()),
               "questions": str(Path(args.questions).resolve()), "method": args.method, "seed": args.seed,
               "limit": args.limit, "exchanges": args.exchanges, "forms": list(forms), "persona_id": persona_id,
               "judging": _judging(args).model_dump()}
    job = JobSpec(job_id=f"personamem-{uuid.uuid4().hex[:12]}", kind="personamem", created_by="cli", pool="cli",
                  title=f"PersonaMem-v2 {args.method}", units=[UnitSpec(key="eval", kind="personamem", payload=payload)])
    env = unit_env(ws, make_llm(), open_user_builder=make_builder)
    summary = run_job(ws, job, env)
    if summary.status != "done":
        raise RuntimeError("; ".join(summary.errors or [summary.status]))
    return env.extra.get("personamem_records", [])


def _judging(args: argparse.Namespace):
    """The open-ended judging the flags ask for (several judge models: their mean, unless told otherwise)."""
    from evaluation.personamem.evaluate import Judging

    models = [m.strip() for m in (args.judge_models or "").split(",") if m.strip()]
    return Judging.for_models(models, judges=args.judges, aggregate=args.judge_aggregate, scale=args.judge_scale)


def cmd_personamem(args: argparse.Namespace) -> int:
    from evaluation.personamem.evaluate import FORMS, accuracy_report, report_table
    from evaluation.personamem.loader import PersonaMemError, history_user
    from evaluation.versions import metric_versions
    from memory.methods import METHODS

    forms = tuple(f.strip() for f in args.forms.split(",") if f.strip())
    if args.method not in METHODS:
        print(f"error: unknown method {args.method!r} (methods: {', '.join(METHODS)})", file=sys.stderr)
        return 2
    if not forms or any(f not in FORMS for f in forms) or args.exchanges < 1 or (args.limit is not None and args.limit < 1) \
            or not 1 <= (args.judges or 1) <= 5:
        print("error: --forms must name mcq and/or open; --exchanges ≥ 1; --limit ≥ 1; --judges 1–5", file=sys.stderr)
        return 2
    try:
        _judging(args)
    except ValueError as e:
        print(f"error: --judge-models: {e}", file=sys.stderr)
        return 2
    try:
        persona, history, questions = _load(args)
    except PersonaMemError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    items = questions.evaluable
    skipped = f"; skipped {sum(questions.skipped.values())}: {questions.skipped_text()}" if questions.skipped else ""
    print(f"{args.questions} ({questions.layout}{', persona ' + questions.persona_id if questions.persona_id else ''}):"
          f" {len(items)} question(s), {questions.planting} planting item(s){skipped}", file=sys.stderr)
    items = items[: args.limit] if args.limit else items
    if not items:
        print(f"error: {args.questions}: no item with a query, a correct answer and 3 incorrect answers{skipped}",
              file=sys.stderr)
        return 2
    user = history_user(history, exchanges_per_session=args.exchanges)
    print(f"{persona.name or user.uid}: {len(user.sessions)} pseudo-session(s), {len(items)} item(s), "
          f"method {args.method}", file=sys.stderr)
    try:
        records = _run(args, forms, questions.persona_id)
    except KeyboardInterrupt:
        print("interrupted: the memory build resumes and answers are cached; run the same command again",
              file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{len(records)} record(s) stored (shown on the Evaluate page)", file=sys.stderr)
    if args.records:
        with open(args.records, "w", encoding="utf-8") as f:
            for r in records:
                f.write(r.model_dump_json() + "\n")
    rows = accuracy_report(records)
    versions = metric_versions("personamem")
    if args.json:
        print(json.dumps([{**r, "metric_versions": versions} for r in rows], ensure_ascii=False, indent=1))
    else:
        print(report_table(rows) + f"\nmetric versions: {versions}")
    return 0
