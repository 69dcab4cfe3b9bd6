"""Write ``docs/cli.md``, the ``pal`` command reference, from the argparse definitions (``cli.main.build_parser``).

The reference is generated, never edited by hand: ``python scripts/cli_reference.py`` rewrites it, and
``tests/scripts/test_cli_reference.py`` fails when the file and the parser disagree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cli.main import build_parser  # noqa: E402  (the project root is on the path first)

OUT = ROOT / "docs" / "cli.md"
WIDTH = 110  # help text wrapped as a terminal of this width would show it


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command of ``parser``, in the order they were registered."""
    out = []
    for action in parser._actions:  # argparse keeps no public list of sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: (a.help or "") for a in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias of one already listed
                    continue
                seen.add(id(sub))
                out.append((name, helps.get(name, ""), sub))
    return out


def _help_text(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)  # type: ignore[assignment]  # a fixed width, whatever the terminal
    return parser.format_help().rstrip()


def _sections(parser: argparse.ArgumentParser, path: list[str], depth: int) -> list[str]:
    lines = [f"{'#' * min(depth, 6)} `{' '.join(path)}`", "", "```text", _help_text(parser), "```", ""]
    for name, _help, sub in _subcommands(parser):
        lines += _sections(sub, [*path, name], depth + 1)
    return lines


def render_reference() -> str:
    """The whole reference as markdown: an index of commands, then each command's ``--help``."""
    parser = build_parser()
    parser.prog = "pal"
    index = ["# `pal` command reference", "",
             "Generated from the argparse definitions by `scripts/cli_reference.py`; do not edit by hand.", "",
             "| command | what it does |", "|---|---|"]
    for name, help_, sub in _subcommands(parser):
        index.append(f"| [`pal {name}`](#pal-{name}) | {help_ or (sub.description or '').split(chr(10))[0]} |")
    return "\n".join([*index, "", *_sections(parser, ["pal"], 2)]).rstrip() + "\n"


def main() -> int:
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(render_reference(), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
