"""``pal workspace export | import | inspect``: one dataset's work as one file, and back (see :mod:`studio.bundle`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workspace", help="move a dataset's work between homes as one bundle file (no keys)")
    wsub = p.add_subparsers(dest="workspace_command", required=True)
    ex = wsub.add_parser("export", help="write a dataset's memories, runs, judgments, results, fidelity and "
                                        "review to one file")
    ex.add_argument("--dataset", required=True, help="dataset folder in PAL-Set layout, or a known name (demo, "
                                                     "PAL_DATASETS)")
    ex.add_argument("--users", help="comma-separated user ids (default: every user)")
    ex.add_argument("--methods", help="comma-separated memory methods (default: every method)")
    ex.add_argument("--pseudonymise", "--pseudonymize", action="store_true", dest="pseudonymise",
                    help="replace annotators' and editors' names by annotator-1, person-1, …")
    ex.add_argument("--name", help="the dataset's name in the bundle (default: its known name or folder name)")
    ex.add_argument("--how", action="append", default=[], help="how the records were made (repeat: one step each); "
                                                               "kept in the manifest")
    ex.add_argument("--out", required=True, help="the bundle file to write (e.g. work.palbundle)")
    ex.add_argument("--json", action="store_true", help="print the manifest")
    ex.set_defaults(func=cmd_export)
    im = wsub.add_parser("import", help="merge a bundle into this PAL_HOME (records already here are kept)")
    im.add_argument("bundle", help="the bundle file")
    im.add_argument("--dataset", help="the dataset folder here (default: found by the bundle's dataset name)")
    im.add_argument("--json", action="store_true", help="print what was added and skipped as JSON")
    im.set_defaults(func=cmd_import)
    ins = wsub.add_parser("inspect", help="check a bundle and print its manifest: counts, models, how it was made")
    ins.add_argument("bundle", help="the bundle file")
    ins.add_argument("--json", action="store_true", help="print the whole manifest as JSON")
    ins.set_defaults(func=cmd_inspect)


def _split(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _dataset(arg: str):
    """The dataset folder at ``arg``, or the one known by that name."""
    from cli.context import load_dataset_arg
    from palset.names import configured_datasets

    known = configured_datasets()
    root = Path(arg)
    if not root.is_dir() and arg in known:
        root = known[arg]
    if not root.is_dir():
        raise SystemExit(f"error: {arg}: no such dataset folder (known names: {', '.join(known)})")
    return load_dataset_arg(root, shown=arg)


def cmd_export(args: argparse.Namespace) -> int:
    from cli.context import open_workspace
    from studio.bundle.export import export_bundle

    dataset = _dataset(args.dataset)
    started = time.perf_counter()
    try:
        manifest = export_bundle(open_workspace(), dataset, Path(args.out), name=args.name, users=_split(args.users),
                                 methods=_split(args.methods), pseudonymise_people=args.pseudonymise, how=args.how)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - started
    if args.json:
        print(manifest.model_dump_json(indent=1))
    else:
        print(_summary(manifest))
    print(f"wrote {args.out} ({Path(args.out).stat().st_size / 1e6:.2f} MB) in {seconds:.1f} s", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from cli.context import open_workspace
    from palset.names import configured_datasets
    from studio.bundle.importer import BundleError, import_bundle

    dataset = _dataset(args.dataset) if args.dataset else None
    ws = open_workspace()
    started = time.perf_counter()
    try:
        report = import_bundle(ws, Path(args.bundle), known=configured_datasets(), dataset=dataset)
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - started
    from cli.context import cli_actor

    ws.audit.record(cli_actor(), "bundle.import", Path(args.bundle).name, sha256=report.bundle, dataset=report.dataset,
                    added=report.total_added)
    if args.json:
        print(report.model_dump_json(indent=1))
        return 0
    for table, added in report.added.items():
        skipped = report.skipped.get(table, 0)
        if added or skipped:
            print(f"{table:<22} {added:>7} added {skipped:>7} already here")
    again = " (imported before: nothing new)" if report.already_imported and not report.total_added else ""
    print(f"imported {args.bundle} into {ws.home} for dataset {report.dataset} ({report.dataset_key}): "
          f"{report.total_added} rows added in {seconds:.1f} s{again}", file=sys.stderr)
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from studio.bundle.importer import BundleError, read_bundle

    try:
        bundle = read_bundle(Path(args.bundle))
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(bundle.manifest.model_dump_json(indent=1) if args.json else _summary(bundle.manifest))
    return 0


def _summary(manifest) -> str:
    lines = [f"bundle of dataset {manifest.dataset.name} ({len(manifest.dataset.users)} users), made "
             f"{manifest.created_at} by PAL Studio {manifest.pal_studio_version}"
             + (" · people pseudonymised" if manifest.selection.pseudonymised else "")]
    lines += [f"  {t:<22} {info.rows:>7}  {info.label}" for t, info in manifest.tables.items() if info.rows]
    if manifest.methods:
        lines.append("memory methods: " + ", ".join(f"{m} ({n})" for m, n in manifest.methods.items()))
    for m in manifest.made_with:
        where = " · ".join(x for x in (m.provider, m.endpoint) if x)
        made = ", ".join(f"{n} {k}" for k, n in m.records.items())
        lines.append(f"made with: {m.role} = {m.model}" + (f" ({where})" if where else "")
                     + (f", {m.calls} calls" if m.calls else "") + (f" → {made}" if made else ""))
    lines += [f"how: {h}" for h in manifest.how]
    lines += [f"note: {n}" for n in manifest.notes]
    return "\n".join(lines)


