"""The "in persona" check of a simulated user turn: the one definition of :mod:`sim.persona_check` (the rules the
simulator guards on, so a kept turn's pass is only the model's success where its first draft was kept or is known —
:func:`evaluation.simfidelity.registry.guarded`), and the judge for facts contradicting the profile
(:mod:`.judges`), asked only where the turn states a fact about the user (rule ``persona.states_fact``) and only
when the configuration asks for it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from evaluation.simfidelity.gold import TopicGold
from evaluation.simfidelity.types import TurnCheck
from sim.persona_check import speaks_as_user
from sim.rulebook import PERSONA_RULES, rule_pattern

PersonaJudge = Callable[[str, str], dict]  # (profile, turn) → judges.judge_persona's answer
FACTS = rule_pattern("persona.states_fact", "fact")


def check_persona(text: str, gold: TopicGold, judge: PersonaJudge | None, sources: Sequence[str] = ()) -> TurnCheck:
    """Fails with the reasons of every persona rule the turn breaks (``sources``: what it must not copy — the
    assistant's last message), or (judge) a fact contradicting the profile; passes otherwise."""
    verdict = speaks_as_user(text, gold.language, sources, gold.name)
    failures = list(verdict.reasons)
    evidence: dict = {"rules": list(PERSONA_RULES), "language": verdict.language, "expected_language": gold.language}
    if judge is None:
        evidence["profile"] = "not judged (persona_judge off)"
    elif not FACTS.search(text):
        evidence["profile"] = "not judged: the turn states no fact about the user"
    else:
        answer = judge(gold.profile_text(), text)
        evidence["judge"] = answer
        if answer.get("contradicts"):
            failures.append(f"contradicts the profile ({answer.get('reason', '')})")
    if failures:
        return TurnCheck(check="persona", outcome="fail", reason="; ".join(failures), evidence=evidence)
    return TurnCheck(check="persona", outcome="pass", evidence=evidence,
                     reason="in persona: no persona rule fires" + (", nothing contradicting the profile"
                                                                  if "judge" in evidence else ""))
