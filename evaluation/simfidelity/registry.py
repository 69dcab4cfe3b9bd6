"""The simulator-fidelity checks, registered once: name, version, what each means, which turns it reads, the turn
rules it reads (:mod:`sim.rulebook`), the run figure it feeds and how it is labelled. The page's badges, the CLI's
definitions and tables, the export columns and the review batch's questions take their columns from here
(``tests/evaluation/simfidelity/test_registry.py`` holds each to it).

**Guards are not successes.** The simulator sends back a draft that fails a guard rule (``persona.*``,
``turn.repeat``, ``turn.gives_away``), so a kept turn passes those rules by construction. A check reading a guard
rule therefore never counts a kept turn's pass as the model's success when the turn was asked again
(:func:`guarded`): where its drafts are on record and the first one was sent back by a rule the check reads, the kept
turn's outcome is the first draft's (``fail``); where they are not (turns stored before drafts were kept), the
outcome is ``n/a`` and says why. The model's own rate is the first-draft view (:func:`.checks.check_first_draft`).

How to add a check: ARCHITECTURE.md, "How to add a check".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from review.batches import YES_NO_NA, Question, TaskType, register_task, simturn_task
from sim.rulebook import PERSONA_RULES, rule_of_reason
from sim.types import Utterance

Outcome = Literal["pass", "fail", "n/a"]
CHECKS_VERSION = "7"  # of the whole set: bump when a check's definition or a rule it reads changes (FIDELITY.md)


@dataclass(frozen=True)
class CheckSpec:
    """One registered check (see the module docstring)."""

    name: str
    label: str  # badge and column label
    version: int
    turns: str  # which turns it reads
    definition: str  # one sentence: tooltips, captions, the CLI's --json "definitions"
    figure: str  # the run figure that is its pass rate
    rules: tuple[str, ...] = ()  # the turn rules it reads
    shaped_by: tuple[str, ...] = ()  # guard rules that shape what it measures without being read by it
    on_guarded: Outcome = "n/a"  # a kept turn whose first draft a guard rule of ``rules`` sent back
    question: str = ""  # what a ``simturn`` review batch asks people about the turn ("": not asked)
    answers: Literal["yes_no_na", "yes_no"] = "yes_no_na"  # the options people answer it with
    guideline: str = ""  # the batch guidelines' line on this question (markdown)


CHECK_SPECS: tuple[CheckSpec, ...] = (
    CheckSpec("vague", "vague", 1, "the first turn (Topic Inquiry)",
              "First turn: closer (cosine) to the dataset's user query than to the hidden requirement and every "
              "implicit need.", "vague_rate", shaped_by=("turn.gives_away",),
              question="Vague enough? (the opening turn keeps the hidden needs back)",
              guideline="**Vague enough**: only for the opening turn — yes when it asks about the topic without "
                        "giving the hidden needs away; otherwise *Does not apply*."),
    CheckSpec("truthful", "truthful", 1, "Requirement Confirmation after a Requirement Prediction",
              "Requirement Confirmation: confirms a guess that matches the gold requirement or a need (cosine ≥ τ), "
              "corrects one that does not.", "truthful_rate", rules=("stance",),
              question="Truthful? (a confirmation confirms a right guess and corrects a wrong one)",
              guideline="**Truthful**: only for a Requirement Confirmation — yes when the user confirms a guess "
                        "that is right and corrects one that is wrong."),
    CheckSpec("verdict", "verdict", 1, "Solution Feedback",
              "Solution Feedback: accepts a proposal matching a pos candidate, rejects one matching a neg candidate "
              "(matching no candidate, or a neutral one: n/a).", "verdict_consistency", rules=("stance",),
              question="Consistent with the preference? (accepts what the user likes, rejects what they dislike)",
              guideline="**Consistent with the preference**: only for a Solution Feedback on a proposal that is "
                        "(close to) one of the listed candidate solutions — yes when the user accepts a liked one or "
                        "rejects a disliked one; *Does not apply* for a neutral candidate or a proposal that is "
                        "none of them."),
    CheckSpec("persona", "in persona", 2, "every turn",
              "Every turn: in persona as sim.persona_check defines it (no assistant-style offer, no narration of the "
              "user or the assistant, first person, the user's language, no salutation alone, no prompt talk, no "
              "copy of the assistant's message; with the judge, nothing contradicting the profile). A kept turn "
              "that was asked again passes by construction: it counts as its first draft did, or n/a where that is "
              "not on record.", "persona_rate", rules=PERSONA_RULES, on_guarded="fail",
              question="In persona? (speaks as this user: first person, their language, not like an assistant)",
              answers="yes_no",
              guideline="**In persona**: yes when the turn speaks as this user (first person, their language, not "
                        "offering help like an assistant, nothing against their profile)."),
    CheckSpec("act", "as scheduled", 1, "every turn of a fixed-mode run",
              "Fixed mode: the act the text performs (from its stance and what it answers) is the scheduled act.",
              "schedule_adherence", rules=("stance", "act.asks"),
              question="Does the turn do what its scheduled act asks?",
              guideline="**Scheduled act**: yes when the text does what the act asks (a confirmation reacts to the "
                        "guess, a feedback gives a clear verdict, a discussion asks or objects without a verdict)."),
    CheckSpec("decision", "as decided", 1, "a judging turn the simulator decided in a structured call",
              "A judging turn the simulator decided in a structured call: the text-reading stance classifier agrees "
              "with the decision (the decision, not the words, is the stance the other checks use).",
              "decision_agreement", rules=("stance",)),
)
REGISTRY: dict[str, CheckSpec] = {s.name: s for s in CHECK_SPECS}
CHECKS: tuple[str, ...] = tuple(REGISTRY)
CHECK_DEFINITIONS: dict[str, str] = {s.name: s.definition for s in CHECK_SPECS}
CHECK_LABELS: dict[str, str] = {s.name: s.label for s in CHECK_SPECS}
RATES: dict[str, str] = {s.figure: s.name for s in CHECK_SPECS}  # figure → the check whose pass rate it is
REVIEWED: tuple[str, ...] = tuple(s.name for s in CHECK_SPECS if s.question)  # the checks people answer too
ANSWERS = {"yes_no_na": YES_NO_NA, "yes_no": (("yes", "Yes"), ("no", "No"))}


def review_task() -> TaskType:
    """The ``simturn`` review task: one question per reviewed check, in registry order, with its guideline line."""
    specs = [s for s in CHECK_SPECS if s.question]
    return simturn_task(tuple(Question(s.name, s.question, ANSWERS[s.answers]) for s in specs),
                        [s.guideline for s in specs])


register_task(review_task())  # review sits below evaluation: the checks tell it what to ask


@dataclass(frozen=True)
class Guarded:
    """What a guard did to one kept turn, as far as the record says (:func:`guarded`)."""

    outcome: Outcome
    reason: str
    evidence: dict


def guarded(name: str, utt: Utterance, guards: frozenset[str]) -> Guarded | None:
    """None when the check's outcome on the kept text of ``utt`` is the model's own (the turn was not asked again,
    or its run had no guards); else the outcome to record instead (the module docstring). ``guards``: the rules the
    run's simulator guarded on (:func:`sim.rulebook.guard_rules` for the User-LLM, none for reference simulators)."""
    spec = REGISTRY[name]
    watched = sorted((set(spec.rules) | set(spec.shaped_by)) & guards)
    if not watched or utt.attempts <= 1 or utt.fallback:
        return None
    if utt.drafts:
        first = utt.drafts[0]
        hit = sorted({rule_of_reason(r) or "" for r in first.reasons} & set(watched))
        if not hit:
            return None  # the first draft passed these rules; it was sent back for another
        outcome = spec.on_guarded if set(hit) & set(spec.rules) else "n/a"
        return Guarded(outcome, f"the model's first draft failed {', '.join(hit)} and was sent back; the kept turn "
                                "passes by construction", {"guarded_by": hit, "first_draft": first.text[:300],
                                                           "first_draft_reasons": first.reasons})
    return Guarded("n/a", f"asked again ({utt.attempts} calls) under the guard rules {', '.join(watched)}, and the "
                          "reasons its drafts were sent back were not kept: its pass is not the model's",
                   {"guarded_by": watched, "attempts": utt.attempts})
