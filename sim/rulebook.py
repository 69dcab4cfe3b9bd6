"""The rulebook: every rule that reads a user turn, registered once, with the data it reads.

A **turn rule** has an id, a version, the languages it reads, what it detects, the reason a turn failing it is given
and the data files it reads — ``sim/rules/<id>.<language>.toml``, one per rule and language, each entry a pattern,
its label, an example of text it matches and where the example came from. The simulator's retries
(:mod:`sim.simulator`), ``pal runs check`` (:mod:`sim.recheck`) and the simulator-fidelity checks
(:mod:`evaluation.simfidelity.registry`) all read these rules through this module, so one change reaches all three.

A rule is a **guard** when the simulator sends a draft back on it while generating: a turn it kept passes the rule
by construction, so a check reading a guard rule never counts a kept turn's pass as the model's own success
(:func:`evaluation.simfidelity.registry.guarded_outcome`).

How to add a rule: ARCHITECTURE.md, "How to add a turn rule".
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

RULES_DIR = Path(__file__).parent / "rules"


class RuleEntry(BaseModel):
    """One pattern of a rule's data file: what it matches, the cue it stands for, and evidence that it is real."""

    model_config = ConfigDict(extra="forbid")
    label: str
    pattern: str
    regex: bool = False  # a regular expression as written; otherwise a phrase (whole words in a bounded language)
    example: str = ""  # a text the pattern matches ("" when none was found: ``source`` says where it was looked for)
    source: str


class RuleData(BaseModel):
    """A rule's data file for one language."""

    model_config = ConfigDict(extra="forbid")
    rule: str
    language: str
    version: int
    params: dict[str, str | int | float] = Field(default_factory=dict)
    entry: list[RuleEntry]

    def labels(self) -> list[str]:
        """The labels of the entries, in file order, each once."""
        return list(dict.fromkeys(e.label for e in self.entry))

    def entries(self, label: str) -> list[RuleEntry]:
        return [e for e in self.entry if e.label == label]


class TurnRule(BaseModel):
    """A registered turn rule (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    version: int
    languages: tuple[str, ...]
    detects: str  # one sentence: what a match means
    reason: str = ""  # the reason a failing turn is given (a retry note, a ``pal runs check`` finding); "" for none
    guard: bool = False  # the simulator sends a draft back on it while generating
    reads_data: bool = True  # reads sim/rules/<id>.<language>.toml

    def data_path(self, language: str) -> Path:
        return RULES_DIR / f"{self.id}.{language}.toml"


def _rule(id: str, detects: str, reason: str = "", guard: bool = True, reads_data: bool = True,
          version: int = 1, languages: tuple[str, ...] = ("en", "zh")) -> TurnRule:
    return TurnRule(id=id, version=version, languages=languages, detects=detects, reason=reason, guard=guard,
                    reads_data=reads_data)


RULES: dict[str, TurnRule] = {r.id: r for r in (
    _rule("persona.offer", "An assistant-style greeting or offer, or talk about the chat itself.",
          "assistant-style greeting or offer"),
    _rule("persona.narrates_user", 'Narration about "the user" (or the user\'s full name) instead of the user speaking.',
          'narrates "the user"'),
    _rule("persona.narrates_assistant", "Narration about the assistant (not a person's job, not 'my assistant').",
          'narrates "the assistant"'),
    _rule("persona.prompt_talk", "The prompt's own terms, which a user does not know.", "talks about the prompt"),
    _rule("persona.salutation", "A turn that only addresses the assistant.", "only addresses the assistant"),
    _rule("persona.first_person", "No first person, unless a short reaction or a question of the user's own.",
          "not in the first person"),
    _rule("persona.language", "Not written in the user's language (sim.textstats.detect_language).",
          "not in the user's language", reads_data=False),
    _rule("persona.echo", "Most of the turn copied from the assistant's last message or the prompt.",
          "repeats the assistant or the prompt", reads_data=False),
    _rule("turn.repeat", "Says one of the user's earlier turns again, word for word or nearly.",
          "repeats an earlier message of its own (word for word or nearly)", reads_data=False),
    _rule("turn.gives_away", "Copies the hidden need or a solution the assistant is to find out.",
          "gives away the need or a solution the assistant is to find out (hint at it in your own words, as "
          "vaguely as your question)", reads_data=False),
    _rule("act.asks", "An opening that asks something or raises a problem to talk about (a Topic Inquiry).",
          guard=False),
    _rule("persona.states_fact", "The turn states a fact about the user (only such a turn goes to the persona judge).",
          guard=False),
    _rule("stance", "The turn's stance toward the assistant's last message: accept, reject, partial or none.",
          guard=False, version=2),
)}

# "in persona" (sim.persona_check): the persona rules the simulator guards on
PERSONA_RULES: tuple[str, ...] = tuple(r for r, rule in RULES.items() if r.startswith("persona.") and rule.guard)


class RulebookError(ValueError):
    """A rule data file that does not match its registration (names the file and what is wrong)."""


@cache
def load_rule_data(rule_id: str, language: str) -> RuleData:
    """The data file of ``rule_id`` in ``language``, checked against the registration (rule, language, version)."""
    rule = RULES[rule_id]
    if language not in rule.languages or not rule.reads_data:
        raise RulebookError(f"rule {rule_id!r} reads no data in {language!r}")
    path = rule.data_path(language)
    with path.open("rb") as f:
        data = RuleData.model_validate(tomllib.load(f))
    if (data.rule, data.language, data.version) != (rule_id, language, rule.version):
        raise RulebookError(f"{path.name}: rule {data.rule!r} {data.language!r} v{data.version}, registered as "
                            f"{rule_id!r} {language!r} v{rule.version}")
    return data


def entry_regex(entry: RuleEntry) -> str:
    """An entry's pattern as a regular expression."""
    return entry.pattern if entry.regex else re.escape(entry.pattern)


def compile_label(entries: list[RuleEntry], bounded: bool, longest_first: bool) -> re.Pattern[str]:
    """One case-insensitive regex of ``entries``; ``bounded``: whole words only (English); ``longest_first``: the
    longest pattern is tried first where several match at one place (lexicons), else file order."""
    if longest_first:  # a regular expression sorts as long as it was when it was written with a "re:" prefix
        entries = sorted(entries, key=lambda e: len(e.pattern) + (3 if e.regex else 0), reverse=True)
    body = "|".join(entry_regex(e) for e in entries) or r"(?!x)x"
    return re.compile(rf"(?<![a-z'])({body})(?![a-z])" if bounded else body, re.I)


@cache
def rule_pattern(rule_id: str, label: str, languages: tuple[str, ...] = ("en", "zh")) -> re.Pattern[str]:
    """The entries of ``label`` of ``rule_id`` in ``languages``, in file order, as one regex (persona rules)."""
    entries = [e for lang in languages for e in load_rule_data(rule_id, lang).entries(label)]
    return compile_label(entries, bounded=False, longest_first=False)


def rule_of_reason(reason: str) -> str | None:
    """The id of the rule that gives ``reason`` (a reason may carry details after its fixed words)."""
    return next((r.id for r in RULES.values() if r.reason and reason.startswith(r.reason)), None)


def guard_rules() -> frozenset[str]:
    """The rules the simulator sends drafts back on."""
    return frozenset(r.id for r in RULES.values() if r.guard)


def rulebook_version() -> str:
    """A short fingerprint of every rule's id and version and of what its data files make it read (parameters, and
    each entry's label and pattern): stored findings name it. Examples, sources and comments document a rule without
    changing what it finds, so they leave the fingerprint as it is. Worked out again only when a data file changed
    (pages ask for it on every view)."""
    files = tuple((rule.id, rule.version, tuple(_stamp(rule.data_path(lang)) for lang in rule.languages)
                   if rule.reads_data else ()) for rule in sorted(RULES.values(), key=lambda r: r.id))
    known = _VERSIONS.get(files)
    if known is None:
        known = _VERSIONS[files] = _fingerprint()
    return known


_VERSIONS: dict[tuple, str] = {}


def _stamp(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path), stat.st_mtime_ns, stat.st_size


def _fingerprint() -> str:
    digest = hashlib.sha1()
    for rule in sorted(RULES.values(), key=lambda r: r.id):
        digest.update(f"{rule.id}@{rule.version};".encode())
        for lang in rule.languages if rule.reads_data else ():
            with rule.data_path(lang).open("rb") as f:  # as the file is now (load_rule_data caches)
                data = RuleData.model_validate(tomllib.load(f))
            read = {"params": data.params, "entries": [(e.label, e.pattern, e.regex) for e in data.entry]}
            digest.update(json.dumps(read, sort_keys=True, ensure_ascii=False).encode())
    return digest.hexdigest()[:10]
