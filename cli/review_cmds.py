"""``pal review list | delete``: the review batches of this PAL_HOME, and removing one nobody has answered in.

Why a command: a batch shows its annotators fixed transcripts, so ``pal runs discard`` refuses a run a batch shows;
recording such a run anew (``scripts/record_demo.py --redo``) first removes the batch, then makes it again. A batch
with answers is never deleted (the store refuses, nothing goes)."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("review", help="list review batches, delete one nobody has answered in")
    rsub = p.add_subparsers(dest="review_command", required=True)
    ls = rsub.add_parser("list", help="every review batch, newest first: task, items, answers, who created it")
    ls.add_argument("--run", help="only the batches that show this simulation run to annotators")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=cmd_list)
    dl = rsub.add_parser("delete", help="delete review batches with their items and assignments (refused, nothing "
                                        "deleted, for a batch with answers)")
    dl.add_argument("batch_ids", nargs="+", help="the batches to delete")
    dl.add_argument("--yes", action="store_true", help="delete them (without it, only say what would go)")
    dl.set_defaults(func=cmd_delete)


def cmd_list(args: argparse.Namespace) -> int:
    from cli.context import open_workspace

    store = open_workspace().reviews
    batches = store.batches()
    if args.run:
        showing = set(store.batches_showing_run(args.run))
        batches = [b for b in batches if b["batch_id"] in showing]
    rows = [{"batch_id": b["batch_id"], "title": b["title"], "task": b["task"], "dataset": b["dataset"],
             "items": len(store.items(b["batch_id"])), "answers": store.count_answers(b["batch_id"]),
             "annotators": b["annotators"], "created_by": b["created_by"]} for b in batches]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return 0
    for r in rows:
        print(f"{r['batch_id']:<12} {r['task']:<9} {r['items']:>4} items {r['answers']:>5} answers  "
              f"{r['title']} (by {r['created_by']}; {', '.join(r['annotators'])})")
    print(f"{len(rows)} batch(es)", file=sys.stderr)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Check every batch first (stored, no answers) so that nothing goes unless all can; then, with ``--yes``,
    delete each in its own transaction (the store refuses one answered meanwhile) and record it in the audit log."""
    from cli.context import cli_actor, open_workspace
    from review.store import BatchAnswered

    ws = open_workspace()
    ids = list(dict.fromkeys(args.batch_ids))
    problems = []
    for b in ids:  # one look at each batch: stored, then unanswered
        if ws.reviews.batch(b) is None:
            problems.append(f"{b}: no such review batch in {ws.home}")
        elif answered := ws.reviews.count_answers(b):
            problems.append(f"{b}: {answered} answer(s) given in it")
    if problems:
        print("error: nothing deleted: " + "; ".join(problems), file=sys.stderr)
        return 2
    if not args.yes:
        for b in ids:
            print(f"would delete review batch {b} ({len(ws.reviews.items(b))} item(s), no answers)")
        print("nothing deleted: add --yes to delete", file=sys.stderr)
        return 1
    for b in ids:
        try:
            gone = ws.reviews.delete_batch(b)
        except (BatchAnswered, KeyError) as e:  # answered (or deleted) between the check and here
            print(f"error: {e.args[0]}", file=sys.stderr)
            return 2
        ws.audit.record(cli_actor(), "review.batch_delete", b, title=gone["title"], task=gone["task"],
                        items=gone["items"])
        print(f"deleted review batch {b} ({gone['items']} item(s), {gone['task']}: {gone['title']})")
    return 0
