"""The ``user_style`` option of the User-LLM: profile and message-style conditioning from the user's own turns of
earlier sessions, what SimulatorArena (EMNLP 2025) found brings simulated users closer to real ones.

From every dialogue turn the user wrote in sessions *before* the simulated one (never the simulated session or a
later one), :func:`style_profile` takes the message style — median length, how often a turn asks a question or
speaks in the first person — and the interaction profile — how often the user confirmed or corrected the
assistant's guesses and accepted or rejected its proposals (:mod:`sim.stance`) — and a few of those turns as
examples, the most recent of each act. :func:`style_fragment` renders them with ``prompts/sim/user_style.md`` (a
versioned fragment of its own, so the simulator's main prompt stays untouched); the User-LLM puts it into its
system message (:func:`sim.prompting.simulator_system`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from backends.prompts import Prompt, load_prompt
from memory.privacy import redact_text
from palset.dataset import Session, User
from palset.vocab import USER_ACTS, Act
from sim import textstats
from sim.stance import classify_stance

PROMPT = "sim/user_style"
MAX_EXAMPLES = 4
EXAMPLE_CHARS = 220


@dataclass
class StyleProfile:
    """What the user's earlier turns show: ``turns`` counted, style figures, verdict counts and example turns."""

    turns: int = 0
    length: float = 0.0  # median tokens
    questions: float = 0.0  # share of turns asking a question
    first_person: float = 0.0  # share of turns in the first person
    confirmations: dict[str, int] = field(default_factory=dict)  # stance → count, Requirement Confirmation turns
    verdicts: dict[str, int] = field(default_factory=dict)  # stance → count, Solution Feedback turns
    examples: list[tuple[str, str]] = field(default_factory=list)  # (act, text), most recent first

    def as_dict(self) -> dict:
        return {"turns": self.turns, "length": self.length, "questions": self.questions,
                "first_person": self.first_person, "confirmations": self.confirmations, "verdicts": self.verdicts,
                "examples": [list(e) for e in self.examples]}


def earlier_turns(user: User, session: Session) -> list[tuple[Act, str]]:
    """(act, text) of every user turn of the sessions before ``session``, oldest first."""
    return [(t.user.action, t.user.content) for s in user.sessions if s.index < session.index for t in s.turns
            if t.user.action in USER_ACTS and t.user.content.strip()]


def style_profile(turns: list[tuple[Act, str]], language: str) -> StyleProfile:
    """The profile of ``turns`` (see the module docstring); an empty profile when there are none."""
    if not turns:
        return StyleProfile()
    feats = [textstats.features(text) for _, text in turns]
    profile = StyleProfile(turns=len(turns), length=float(statistics.median(f["length"] for f in feats)),
                           questions=sum(f["questions"] > 0 for f in feats) / len(feats),
                           first_person=sum(f["first_person"] for f in feats) / len(feats))
    for act, text in turns:
        target = {Act.REQUIREMENT_CONFIRMATION: profile.confirmations, Act.SOLUTION_FEEDBACK: profile.verdicts}.get(act)
        if target is not None:
            label = classify_stance(text, language).label
            target[label] = target.get(label, 0) + 1
    seen: set[Act] = set()
    for act, text in reversed(turns):  # the most recent turn of each act
        if act not in seen and len(profile.examples) < MAX_EXAMPLES:
            seen.add(act)
            profile.examples.append((act.value, text))
    return profile


def _counts(counts: dict[str, int], words: dict[str, str]) -> str:
    parts = [f"{words[k]} {counts[k]}" for k in words if counts.get(k)]
    return ", ".join(parts)


def profile_lines(profile: StyleProfile) -> str:
    """The interaction profile in words (what the user did with guesses and proposals before)."""
    if not profile.turns:
        return "(No earlier conversation with the assistant: keep to the persona.)"
    lines = [f"In {profile.turns} earlier turns with the assistant:"]
    if confirm := _counts(profile.confirmations, {"accept": "confirmed its guess", "reject": "corrected it",
                                                  "partial": "half agreed"}):
        lines.append(f"- about its guesses of their needs they {confirm} (times);")
    if verdict := _counts(profile.verdicts, {"accept": "accepted", "reject": "rejected", "partial": "half accepted"}):
        lines.append(f"- about its proposals they {verdict} (times). Judge each proposal by their preferences, as then.")
    return "\n".join(lines)


def style_fragment(profile: StyleProfile, prompt: Prompt | None = None) -> str:
    """``prompts/sim/user_style.md`` filled with ``profile`` (example texts PII-redacted and clipped)."""
    prompt = prompt or load_prompt(PROMPT)
    examples = "\n".join(f"- ({act}) {redact_text(text)[:EXAMPLE_CHARS]}" for act, text in profile.examples)
    return prompt.render(profile=profile_lines(profile), length=f"{profile.length:.0f}",
                         questions=f"{profile.questions:.0%}", first_person=f"{profile.first_person:.0%}",
                         examples=examples or "(nothing yet)")
