"""The documents agree with the code: the generated CLI reference, the README's commands, the links between
documents, and the README's length (a user's page, not a notebook)."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import sys

import pytest

from cli.main import build_parser
from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
cli_reference = importlib.util.module_from_spec(spec)
sys.modules["cli_reference"] = cli_reference
spec.loader.exec_module(cli_reference)

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "ARCHITECTURE.md",
        ROOT / "CONTRIBUTING.md", ROOT / "FIDELITY.md"]
PAL = re.compile(r"^(?:\.venv/bin/)?pal (?P<args>.*)$")
LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")
FENCED = re.compile(r"^```.*?^```", re.M | re.S)  # a printout or example in a code block: its brackets are no link


def _code_lines(text: str) -> list[str]:
    """The lines inside fenced code blocks, continuation lines joined, comments cut."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if inside:
            if out and out[-1].endswith("\\"):
                out[-1] = out[-1][:-1] + " " + line.strip()
            else:
                out.append(line.split("  #")[0].strip())
    return out


def _pal_commands(text: str) -> list[str]:
    return [m["args"] for line in _code_lines(text) for part in line.split(" ; ") if (m := PAL.match(part.strip()))]


def test_the_cli_reference_is_what_the_parser_says():
    """docs/cli.md is generated; run ``python scripts/cli_reference.py`` after changing a command."""
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == cli_reference.render_reference()


def test_every_command_in_the_readme_parses_as_written():
    commands = _pal_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(commands) >= 10
    parser = build_parser()
    for args in commands:
        try:
            parser.parse_args(shlex.split(args))
        except SystemExit:
            pytest.fail(f"README: `pal {args}` does not parse")


def _subparser(parser: argparse.ArgumentParser, words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The deepest sub-command named by ``words``, and the words after it."""
    while words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or words[0] not in subs[0].choices:
            break
        parser, words = subs[0].choices[words[0]], words[1:]
    return parser, words


def test_every_example_in_the_docs_names_a_real_command_and_real_options():
    """Examples may show ``[optional]`` parts and ``a|b`` choices, so they are checked for names, not parsed."""
    parser = build_parser()
    wrong = []
    for doc in DOCS:
        for args in _pal_commands(doc.read_text(encoding="utf-8")):
            sub, rest = _subparser(parser, args.replace("[", " ").replace("]", " ").replace("|", " ").split())
            known = {opt for a in sub._actions for opt in a.option_strings}
            if sub is parser:
                wrong.append(f"{doc.name}: `pal {args}` names no command")
            wrong += [f"{doc.name}: `pal {args}`: {w}" for w in rest
                      if w.startswith("--") and w.split("=")[0] not in known]
    assert wrong == []


def test_links_between_documents_point_at_files_that_exist():
    broken = []
    for doc in DOCS:
        for m in LINK.finditer(FENCED.sub("", doc.read_text(encoding="utf-8"))):
            target = m["target"]
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} → {target}")
    assert broken == []


def test_the_readme_is_a_page_for_users():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150
    assert "make run" in "\n".join(lines) and "make test" in "\n".join(lines)
