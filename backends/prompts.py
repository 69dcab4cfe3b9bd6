"""Prompts are named, versioned files: ``prompts/<name>.md``, loaded by one function.

A file starts with a front matter block::

    ---
    version: 2
    description: what the prompt is for
    ---
    Text with $placeholders (string.Template syntax, so JSON braces need no escaping).

The version is recorded with every LLM call and shown in the UI next to the output it produced.

A body may be split into named sections by lines ``[[name]]``. Sections named ``system``, ``user`` or
``assistant`` become chat messages in file order (:meth:`Prompt.messages`): what is the same for every call of
the prompt (instructions, the user's context) goes first, so a server's prompt cache serves it, and the call's own
part last. Other names are parts the caller places itself (:meth:`Prompt.part`: e.g. the per-turn cue of a
dialogue role, whose messages are the growing transcript). A body without section lines is one ``user`` message.

A prompt may have language variants: ``<name>.<lang>.md`` (e.g. ``sim/user_simulator.zh.md``), written in that
language, with the same sections and placeholders; :func:`load_prompt` with ``language`` picks it when it exists
(and ``PAL_PROMPT_WORDING=english`` keeps the English file, with its "answer in …" instruction, for comparing).
"""

from __future__ import annotations

import logging
import os
import re
import string
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from backends.paths import PROJECT_ROOT

log = logging.getLogger(__name__)

PROMPTS_DIR = PROJECT_ROOT / "prompts"
MESSAGE_ROLES = ("system", "user", "assistant")
_SECTION = re.compile(r"^\[\[([a-z][a-z0-9_]*)\]\][ \t]*$", re.M)
WORDING_ENV = "PAL_PROMPT_WORDING"  # "native" (default): a language variant when there is one; "english": never


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
        return set(_placeholders(self.text))

    def render(self, **values: object) -> str:
        """Fill every placeholder; a missing one is an error naming the prompt and the variable. A prompt with
        sections renders as their texts one after another (what a model would read in one message)."""
        return "\n\n".join(self._fill(text, values) for _, text in self.sections)

    def _fill(self, text: str, values: dict[str, object]) -> str:
        missing = _placeholders(text) - values.keys()
        if missing:
            raise PromptError(f"prompt {self.name} v{self.version}: no value for {', '.join(sorted(missing))}")
        return _template(text).substitute({k: str(v) for k, v in values.items()})

    @cached_property
    def sections(self) -> tuple[tuple[str, str], ...]:
        """(name, text) in file order; one ``user`` section for a body without section lines. Split once per
        prompt (a prompt is loaded once per file version, and every call renders some of its sections)."""
        marks = list(_SECTION.finditer(self.text))
        if not marks:
            return (("user", self.text),)
        return tuple((m.group(1), self.text[m.end():marks[i + 1].start() if i + 1 < len(marks) else len(self.text)]
                      .strip("\n")) for i, m in enumerate(marks))

    @cached_property
    def _parts(self) -> dict[str, str]:
        """Each section's text by name (the first, should a name come twice)."""
        return dict(reversed(self.sections))

    def part(self, section: str, /, **values: object) -> str:
        """One section filled (only its own placeholders are needed)."""
        text = self._parts.get(section)
        if text is None:
            raise PromptError(f"prompt {self.name} v{self.version}: no section [[{section}]]")
        return self._fill(text, values)

    def has_part(self, section: str, /) -> bool:
        return section in self._parts

    def messages(self, **values: object) -> list[dict[str, str]]:
        """The chat messages of the prompt: its ``system``/``user``/``assistant`` sections filled, in order."""
        out = [{"role": name, "content": self._fill(text, values)} for name, text in self.sections
               if name in MESSAGE_ROLES]
        if not out:
            raise PromptError(f"prompt {self.name} v{self.version}: no system, user or assistant section")
        return out

    @property
    def label(self) -> str:
        return f"{self.name}@v{self.version}"


@lru_cache(maxsize=1024)
def _placeholders(text: str) -> frozenset[str]:
    """The placeholders of a prompt's text (kept for the texts used last: sections are rendered on every call)."""
    return frozenset(m.group("named") or m.group("braced") for m in string.Template.pattern.finditer(text)
                     if m.group("named") or m.group("braced"))


@lru_cache(maxsize=1024)
def _template(text: str) -> string.Template:
    return string.Template(text)


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
    prompt = Prompt(name=name, version=meta["version"], text=body, description=meta.get("description", ""), path=path)
    names = [n for n, _ in prompt.sections]
    if len(set(names)) != len(names):
        raise PromptError(f"prompt {name}: a section name appears twice ({', '.join(names)})")
    return prompt


# a language as a prompt names it, in the prompt's own wording (English, or a ``.zh`` variant's Chinese)
LANGUAGE_LABELS = {"en": {"en": "English", "zh": "Chinese (简体中文)"}, "zh": {"en": "英文", "zh": "简体中文"}}


def prompt_language(prompt: Prompt) -> str:
    """The language a prompt is worded in: ``zh`` for a ``.zh`` variant, else English."""
    return "zh" if prompt.name.endswith(".zh") else "en"


def language_label(prompt: Prompt, code: str) -> str:
    """The language ``code`` (``en``, ``zh``…) named in ``prompt``'s wording (e.g. "Chinese (简体中文)" or "简体中文")."""
    labels = LANGUAGE_LABELS[prompt_language(prompt)]
    return labels.get(code, code)


def wording() -> str:
    """``native`` (language variants are used) or ``english`` (``PAL_PROMPT_WORDING``; anything else is native)."""
    return "english" if os.environ.get(WORDING_ENV, "").strip().lower() == "english" else "native"


_LOADED: dict[tuple[str, str, str | None, str], tuple[Path, int, Prompt]] = {}  # see load_prompt


def load_prompt(name: str, directory: Path = PROMPTS_DIR, language: str | None = None) -> Prompt:
    """Load ``<directory>/<name>.md`` (names may contain ``/`` for grouped prompts); with ``language`` (``zh``…)
    its variant ``<name>.<language>.md`` when there is one and the wording is native (:func:`wording`).

    A prompt is read and parsed once while its file stays unchanged (every LLM call loads its prompt; resolving,
    reading and parsing the file each time cost more than the rest of the call's preparation)."""
    key = (str(directory), name, language, wording())
    if (known := _LOADED.get(key)) is not None:
        try:
            if known[0].stat().st_mtime_ns == known[1]:
                return known[2]
        except OSError:
            log.info("prompt file %s is gone; loading %s again", known[0], name)
    prompt = _load_prompt(name, directory, language)
    if prompt.path is not None:
        _LOADED[key] = (prompt.path, prompt.path.stat().st_mtime_ns, prompt)
    return prompt


def _load_prompt(name: str, directory: Path, language: str | None) -> Prompt:
    if language and language != "en" and wording() == "native":
        variant = directory / f"{name}.{language}.md"
        if variant.is_file():
            return load_prompt(f"{name}.{language}", directory)
    path = (directory / f"{name}.md").resolve()
    if directory.resolve() not in path.parents:
        raise PromptError(f"prompt name {name!r} leaves the prompts folder")
    if not path.is_file():
        raise PromptError(f"no prompt {name!r} (expected {path})")
    return parse_prompt(name, path.read_text(encoding="utf-8"), path)


def list_prompts(directory: Path = PROMPTS_DIR) -> list[Prompt]:
    return [load_prompt(str(p.relative_to(directory).with_suffix("")), directory) for p in sorted(directory.rglob("*.md"))]
