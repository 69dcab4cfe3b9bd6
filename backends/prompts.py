"""Prompts are named, versioned files: ``prompts/<name>.md``, loaded by one function.

A file starts with a front matter block::

    ---
    version: 2
    description: what the prompt is for
    ---
    Text with $placeholders (string.Template syntax, so JSON braces need no escaping).

The version is recorded with every LLM call and shown in the UI next to the output it produced.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path

from backends.paths import PROJECT_ROOT

PROMPTS_DIR = PROJECT_ROOT / "prompts"


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    text: str
    description: str = ""
    path: Path | None = field(default=None, compare=False)

    @property
    def placeholders(self) -> set[str]:
        return {m.group("named") or m.group("braced") for m in string.Template.pattern.finditer(self.text)
                if m.group("named") or m.group("braced")}

    def render(self, **values: object) -> str:
        """Fill every placeholder; a missing one is an error naming the prompt and the variable."""
        missing = self.placeholders - set(values)
        if missing:
            raise PromptError(f"prompt {self.name} v{self.version}: no value for {', '.join(sorted(missing))}")
        return string.Template(self.text).substitute({k: str(v) for k, v in values.items()})

    @property
    def label(self) -> str:
        return f"{self.name}@v{self.version}"


def parse_prompt(name: str, raw: str, path: Path | None = None) -> Prompt:
    meta: dict[str, str] = {}
    body = raw
    if raw.startswith("---"):
        head, sep, rest = raw[3:].partition("\n---")
        if not sep:
            raise PromptError(f"prompt {name}: front matter is not closed with ---")
        for line in head.strip().splitlines():
            key, colon, value = line.partition(":")
            if not colon:
                raise PromptError(f"prompt {name}: front matter line {line!r} is not 'key: value'")
            meta[key.strip()] = value.strip()
        body = rest.lstrip("\n")
    if "version" not in meta:
        raise PromptError(f"prompt {name}: front matter needs a version")
    unknown = set(meta) - {"version", "description"}
    if unknown:
        raise PromptError(f"prompt {name}: unknown front matter field {sorted(unknown)[0]!r}")
    return Prompt(name=name, version=meta["version"], text=body, description=meta.get("description", ""), path=path)


def load_prompt(name: str, directory: Path = PROMPTS_DIR) -> Prompt:
    """Load ``<directory>/<name>.md`` (names may contain ``/`` for grouped prompts)."""
    path = (directory / f"{name}.md").resolve()
    if directory.resolve() not in path.parents:
        raise PromptError(f"prompt name {name!r} leaves the prompts folder")
    if not path.is_file():
        raise PromptError(f"no prompt {name!r} (expected {path})")
    return parse_prompt(name, path.read_text(encoding="utf-8"), path)


def list_prompts(directory: Path = PROMPTS_DIR) -> list[Prompt]:
    return [load_prompt(str(p.relative_to(directory).with_suffix("")), directory) for p in sorted(directory.rglob("*.md"))]
